// onnxruntime's com.microsoft.nchwc layout (ir/ops/contrib_nchwc.h): putting a reordered filter
// back in OIHW order against filters laid out by hand from the layout's definition, the channel
// moves between plain and blocked tensors of block 8, and the block size rule.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backends/cpu/kernels/contrib_nchwc.h"
#include "ir/ops/contrib_nchwc.h"

namespace kiln {
namespace {

using cpu::OrtFilterLayout;

// OIHW value of (o, i, k): names its position.
float positional(int64_t o, int64_t i, int64_t k) {
  return static_cast<float>(o * 100 + i * 10 + k);
}

// True when oihw holds positional(o, i, k) at every (o, i, k) of [co, ci, taps].
bool holdsPositionalValues(const std::vector<float>& oihw, int64_t co, int64_t ci, int64_t taps) {
  for (int64_t o = 0; o < co; ++o)
    for (int64_t i = 0; i < ci; ++i)
      for (int64_t k = 0; k < taps; ++k)
        if (oihw[static_cast<size_t>((o * ci + i) * taps + k)] != positional(o, i, k)) return false;
  return true;
}

TEST(OrtNchwcFilter, OIHWBoPutsOneOutputBlockOfEachInputChannelAndTapTogether) {
  // Co 4, Ci 2, 1x2 kernel, block 2: [ob][i][k][bo].
  const int64_t co = 4, ci = 2, taps = 2, block = 2;
  std::vector<float> reordered;
  for (int64_t ob = 0; ob < co / block; ++ob)
    for (int64_t i = 0; i < ci; ++i)
      for (int64_t k = 0; k < taps; ++k)
        for (int64_t bo = 0; bo < block; ++bo)
          reordered.push_back(positional(ob * block + bo, i, k));
  // By hand, the first output block: o 0/1 of (i 0, k 0), (i 0, k 1), (i 1, k 0), (i 1, k 1).
  EXPECT_EQ(std::vector<float>(reordered.begin(), reordered.begin() + 8),
            (std::vector<float>{0, 100, 1, 101, 10, 110, 11, 111}));
  const std::vector<float> oihw =
      cpu::ortFilterToOihw(reordered.data(), co, ci, taps, block, OrtFilterLayout::kOIHWBo);
  EXPECT_TRUE(holdsPositionalValues(oihw, co, ci, taps));
}

TEST(OrtNchwcFilter, OIHWBiBoPutsABlockByBlockTileForEachTap) {
  // Co 2, Ci 4, one tap, block 2: [ob][ib][k][bi][bo]; by hand, the tile of (ob 0, ib 1) holds
  // W[o 0..1][i 2..3] input channel by input channel.
  const std::vector<float> reordered = {0, 100, 1, 101, 2, 102, 3, 103};
  const std::vector<float> oihw =
      cpu::ortFilterToOihw(reordered.data(), 2, 4, 1, 2, OrtFilterLayout::kOIHWBiBo);
  EXPECT_EQ(oihw, (std::vector<float>{0, 1, 2, 3, 100, 101, 102, 103}));
  // A larger one, built from the definition, with several taps.
  const int64_t co = 16, ci = 16, taps = 3, block = 8;
  std::vector<float> big(static_cast<size_t>(co * ci * taps));
  for (int64_t o = 0; o < co; ++o)
    for (int64_t i = 0; i < ci; ++i)
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t at = (((o / block) * (ci / block) + i / block) * taps + k) * block * block +
                           (i % block) * block + o % block;
        big[static_cast<size_t>(at)] = positional(o, i, k);
      }
  const std::vector<float> back =
      cpu::ortFilterToOihw(big.data(), co, ci, taps, block, OrtFilterLayout::kOIHWBiBo);
  EXPECT_TRUE(holdsPositionalValues(back, co, ci, taps));
}

TEST(OrtNchwcLayout, BlocksOfEightRoundTripWithZeroPadding) {
  // N 2, C 11 -> Cp 16 at block 8, 3 pixels; plain NCHW and NHWC.
  const int64_t n = 2, c = 11, cp = 16, pixels = 3, block = 8;
  for (bool channelsLast : {false, true}) {
    std::vector<float> plain(static_cast<size_t>(n * c * pixels));
    for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<float>(i + 1);
    std::vector<float> blocked(static_cast<size_t>(n * cp * pixels), -1.0f);
    cpu::blockChannels(plain.data(), blocked.data(), n, c, cp, pixels, block, channelsLast);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < cp; ++ch)
        for (int64_t p = 0; p < pixels; ++p) {
          const float got = blocked[static_cast<size_t>(
              ((b * (cp / block) + ch / block) * pixels + p) * block + ch % block)];
          const int64_t from = channelsLast ? (b * pixels + p) * c + ch : (b * c + ch) * pixels + p;
          EXPECT_EQ(got, ch < c ? plain[static_cast<size_t>(from)] : 0.0f);
        }
    std::vector<float> back(plain.size());
    cpu::unblockChannels(blocked.data(), back.data(), n, c, cp, pixels, block, channelsLast);
    EXPECT_EQ(back, plain);
  }
}

TEST(OrtNchwcLayout, BlockSizeFollowsTheCpuUnlessForced) {
  const int64_t native = __builtin_cpu_supports("avx512f") ? 16 : 8;
  unsetenv("KILN_ORT_NCHWC_BLOCK");
  EXPECT_EQ(ir::ortNchwcBlockSize(), native);
  setenv("KILN_ORT_NCHWC_BLOCK", "8", 1);
  EXPECT_EQ(ir::ortNchwcBlockSize(), 8);
  setenv("KILN_ORT_NCHWC_BLOCK", "16", 1);
  EXPECT_EQ(ir::ortNchwcBlockSize(), 16);
  setenv("KILN_ORT_NCHWC_BLOCK", "12", 1);  // not a block size: ignored
  EXPECT_EQ(ir::ortNchwcBlockSize(), native);
  unsetenv("KILN_ORT_NCHWC_BLOCK");
  EXPECT_EQ(ir::roundUpToBlock(20, 16), 32);
  EXPECT_EQ(ir::roundUpToBlock(16, 8), 16);
}

}  // namespace
}  // namespace kiln
