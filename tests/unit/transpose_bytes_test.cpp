// transposeBytes against the definition, and copyStrided's byte path (the NCHW <-> NHWC
// Transposes of 8-bit tensors) against an index-by-index copy.
#include "backends/cpu/kernels/transpose_bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/kernels/copy_util.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(TransposeBytes, MatchesTheDefinitionAtRaggedAndBlockSizes) {
  for (int threads : {1, 2}) {
    testing::ScopedThreads scope(threads);
    for (int64_t rows : {1, 3, 15, 16, 17, 32, 49, 100}) {
      for (int64_t cols : {1, 2, 16, 31, 48, 64, 1000}) {
        const std::vector<uint8_t> src = randomBytes(static_cast<size_t>(rows * cols), 7);
        std::vector<uint8_t> dst(src.size(), 0xAA);
        transposeBytes(src.data(), rows, cols, dst.data());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            ASSERT_EQ(dst[c * rows + r], src[r * cols + c])
                << rows << "x" << cols << " at " << r << "," << c << ", " << threads << " threads";
      }
    }
  }
}

// NCHW -> NHWC and back, as Transpose's strides give them, batch 2.
TEST(TransposeBytes, CopyStridedTakesItForChannelsLastPermutations) {
  const int64_t n = 2, c = 24, h = 7, w = 9;
  const std::vector<uint8_t> x = randomBytes(static_cast<size_t>(n * c * h * w), 3);
  std::vector<uint8_t> nhwc(x.size()), back(x.size());
  copyStrided(x.data(), {n, h, w, c}, {c * h * w, w, 1, h * w}, nhwc.data());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p)
        ASSERT_EQ(nhwc[(b * h * w + p) * c + ch], x[(b * c + ch) * h * w + p]);
  copyStrided(nhwc.data(), {n, c, h, w}, {h * w * c, 1, w * c, c}, back.data());
  EXPECT_EQ(back, x);
}

}  // namespace
}  // namespace kiln::cpu
