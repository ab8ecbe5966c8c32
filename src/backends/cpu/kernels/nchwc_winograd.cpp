// Winograd in the blocked layout (nchwc_winograd.h): where it pays off, the weight transform and
// packings, and the dispatch to the AVX-512 kernels (FP32 nchwc_winograd_avx512.cpp, BF16
// nchwc_winograd_bf16_avx512bf16.cpp).
#include "backends/cpu/kernels/nchwc_winograd.h"

#include <algorithm>
#include <stdexcept>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "core/half.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

// Winograd trades multiplies for bigger weights ((m + 2)^2 / 9 times the direct ones: 4x for
// F(4x4), 1.8x for F(2x2)) that stream from memory on every run, each value used once per tile;
// with few tiles that costs more than the multiplies saved. Measured in ResNet-50 (`kiln bench
// --profile`, one thread, ms per layer, direct / F(2x2) / F(4x4)):
//   64 ch 56x56 (196 tiles of 4x4):  1.84-1.94 / 1.07-1.30 / 0.72-0.88
//   128 ch 28x28 (49 tiles of 4x4):  1.81-2.14 / 0.98-1.02 / 0.92-1.03
//   256 ch 14x14 (16 of 4x4, 49 of 2x2): 1.86-2.26 / 1.21-1.26 / 1.61-1.66
//   512 ch 7x7 (4 of 4x4, 16 of 2x2): 1.94-2.18 / 2.95-3.01 / 4.10-4.36
// So: F(4x4) from 32 tiles of 4x4 on, else F(2x2) from 32 tiles of 2x2 on, else direct. The
// channel counts do not enter: ResNet's layers all trade channels for size alike, and the
// transforms are cheap next to the products even with few channels (SqueezeNet's 3x3 expand
// layers, 16-64 channels in, 55x55 to 13x13: 0.25-0.48 ms direct, 0.20-0.34 Winograd).
constexpr int64_t kMinWinogradTiles = 32;

int nchwcWinogradTile(int64_t outHeight, int64_t outWidth) {
  if (activeCpuIsa() < CpuIsa::kAvx512) return 0;
  auto tiles = [&](int64_t m) { return ((outHeight + m - 1) / m) * ((outWidth + m - 1) / m); };
  if (tiles(4) >= kMinWinogradTiles) return 4;
  if (tiles(2) >= kMinWinogradTiles) return 2;
  return 0;
}

namespace {

// G (alpha x 3) of F(m x m, 3 x 3), alpha = m + 2, row-major; the interpolation points are
// 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), plus infinity (the last row).
const double kG2[4 * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
const double kG4[6 * 3] = {1.0 / 4,  0,         0,        -1.0 / 6, -1.0 / 6, -1.0 / 6,
                           -1.0 / 6, 1.0 / 6,   -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
                           1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,        1};

}  // namespace

NchwcWinogradWeights packNchwcWinogradWeights(const float* w, int64_t outChannels,
                                              int64_t inChannels, int tile) {
  if (tile != 2 && tile != 4) throw std::invalid_argument("Winograd output tile must be 2 or 4");
  const int alpha = tile + 2, positions = alpha * alpha;
  const double* g = tile == 2 ? kG2 : kG4;
  const int64_t outBlocks = ir::nchwcBlocks(outChannels);
  const int64_t positionFloats = outBlocks * kNchwcBlock * inChannels;
  NchwcWinogradWeights packed;
  packed.tile = tile;
  packed.inChannels = inChannels;
  packed.outChannels = outChannels;
  packed.floats = positions * positionFloats;
  packed.data = allocateSharedFloats(packed.floats);
  float* out = packed.data.get();
  for (int64_t gi = 0; gi < nchwcOutBlockGroups(outBlocks); ++gi) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, gi);
    const int64_t m = r.end - r.begin;
    for (int64_t co = r.begin * kNchwcBlock; co < std::min(outChannels, r.end * kNchwcBlock);
         ++co) {
      const int64_t lane = co - r.begin * kNchwcBlock;
      for (int64_t ci = 0; ci < inChannels; ++ci) {
        const float* k = w + (co * inChannels + ci) * 9;
        double gk[6][3];  // G k
        for (int i = 0; i < alpha; ++i) {
          for (int c = 0; c < 3; ++c) {
            gk[i][c] = g[i * 3] * k[c] + g[i * 3 + 1] * k[3 + c] + g[i * 3 + 2] * k[6 + c];
          }
        }
        for (int i = 0; i < alpha; ++i) {
          for (int j = 0; j < alpha; ++j) {
            const double u =
                gk[i][0] * g[j * 3] + gk[i][1] * g[j * 3 + 1] + gk[i][2] * g[j * 3 + 2];
            float* group =
                out + (i * alpha + j) * positionFloats + r.begin * kNchwcBlock * inChannels;
            group[ci * m * kNchwcBlock + lane] = static_cast<float>(u);
          }
        }
      }
    }
  }
  return packed;
}

int64_t nchwcWinogradWeightWords(int64_t outChannels, int64_t inChannels, int tile, bool bf16) {
  return (tile + 2) * (tile + 2) * ir::nchwcBlocks(outChannels) * kNchwcBlock *
         (bf16 ? (inChannels + 1) / 2 : inChannels);
}

NchwcWinogradWeights packNchwcWinogradBf16Weights(const NchwcWinogradWeights& fp32) {
  const int64_t ci = fp32.inChannels, pairs = (ci + 1) / 2;
  const int64_t outBlocks = ir::nchwcBlocks(fp32.outChannels);
  const int positions = (fp32.tile + 2) * (fp32.tile + 2);
  NchwcWinogradWeights packed = fp32;
  packed.bf16 = true;
  packed.floats = nchwcWinogradWeightWords(fp32.outChannels, ci, fp32.tile, true);
  packed.data = allocateSharedFloats(packed.floats);
  auto* words = reinterpret_cast<uint32_t*>(packed.data.get());
  for (int pos = 0; pos < positions; ++pos) {
    for (int64_t gi = 0; gi < nchwcOutBlockGroups(outBlocks); ++gi) {
      const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, gi);
      const int64_t lanes = (r.end - r.begin) * kNchwcBlock;  // M * 16
      const float* src = fp32.data.get() + (pos * outBlocks + r.begin) * kNchwcBlock * ci;
      uint32_t* out = words + (pos * outBlocks + r.begin) * kNchwcBlock * pairs;
      for (int64_t pair = 0; pair < pairs; ++pair) {
        for (int64_t j = 0; j < lanes; ++j) {
          const uint32_t high =
              2 * pair + 1 < ci ? floatToBfloat16Bits(src[(2 * pair + 1) * lanes + j]) : 0;
          out[pair * lanes + j] = floatToBfloat16Bits(src[2 * pair * lanes + j]) | high << 16;
        }
      }
    }
  }
  return packed;
}

uint64_t nchwcWinogradWorkspaceBytes(const NchwcConvShape& shape,
                                     const NchwcWinogradWeights& weights, int threads) {
  if (!weights.data || shape.outHeight <= 0 || shape.outWidth <= 0) return 0;
  return detail::nchwcWinogradScratchBytes(shape, weights, std::max(threads, 1));
}

uint64_t nchwcWinogradWorkspaceBytes(const NchwcConvShape& shape,
                                     const NchwcWinogradWeights& weights) {
  const ThreadPool* pool = currentThreadPool();
  return nchwcWinogradWorkspaceBytes(shape, weights, pool ? pool->size() : 1);
}

void nchwcWinogradConv(const NchwcConvArgs& args, const NchwcWinogradWeights& weights) {
  const NchwcConvShape& s = *args.shape;
  if (s.plainInput || s.depthwise || s.kernelH != 3 || s.kernelW != 3 || s.strideH != 1 ||
      s.strideW != 1 || s.dilationH != 1 || s.dilationW != 1 ||
      s.inChannels != weights.inChannels || s.outChannels != weights.outChannels || !weights.data) {
    throw std::invalid_argument(
        "nchwcWinogradConv needs a blocked 3x3 stride-1 convolution matching its weights");
  }
  if (activeCpuIsa() < CpuIsa::kAvx512) throw std::runtime_error("nchwcWinogradConv needs AVX-512");
  if (!weights.bf16) return detail::nchwcWinogradAvx512(args, weights);
  if (!cpuSupports(CpuIsa::kAvx512Bf16))
    throw std::runtime_error("nchwcWinogradConv: BF16 weights need AVX512_BF16");
  detail::nchwcWinogradBf16Avx512(args, weights);
}

}  // namespace kiln::cpu
