#include "backends/cpu/kernels/nchwc_conv_bf16.h"

#include <algorithm>

#include "core/aligned_memory.h"
#include "core/half.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {

using ir::kNchwcBlock;

int64_t nchwcBf16WeightWords(int64_t outChannels, int64_t inChannels, int64_t taps) {
  return ir::nchwcBlocks(outChannels) * kNchwcBlock * taps * ir::nchwcBlocks(inChannels) *
         kNchwcBlock / 2;
}

NchwcPackedWeights packNchwcBf16Weights(const NchwcPackedWeights& blocked, int64_t outChannels,
                                        int64_t inChannels, int64_t taps) {
  const int64_t outBlocks = ir::nchwcBlocks(outChannels), inBlocks = ir::nchwcBlocks(inChannels);
  NchwcPackedWeights packed;
  packed.floats = nchwcBf16WeightWords(outChannels, inChannels, taps);
  packed.data = allocateSharedFloats(packed.floats);
  auto* words = reinterpret_cast<uint32_t*>(packed.data.get());
  const float* src = blocked.data.get();
  // Each group of M output blocks is inBlocks * taps chunks of [16 channels][M][16] floats.
  for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
    const int64_t lanes = (r.end - r.begin) * kNchwcBlock;  // M * 16
    const int64_t base = r.begin * taps * inBlocks * kNchwcBlock * kNchwcBlock;
    for (int64_t k = 0; k < inBlocks * taps; ++k) {
      const float* chunk = src + base + k * kNchwcBlock * lanes;
      uint32_t* out = words + base / 2 + k * kNchwcBlock / 2 * lanes;
      for (int64_t pair = 0; pair < kNchwcBlock / 2; ++pair) {
        for (int64_t j = 0; j < lanes; ++j) {
          out[pair * lanes + j] = floatToBfloat16Bits(chunk[2 * pair * lanes + j]) |
                                  uint32_t{floatToBfloat16Bits(chunk[(2 * pair + 1) * lanes + j])}
                                      << 16;
        }
      }
    }
  }
  return packed;
}

int64_t nchwcPlainBf16WeightWords(int64_t outChannels, int64_t inChannels, int64_t kernelH,
                                  int64_t kernelW) {
  return ir::nchwcBlocks(outChannels) * kNchwcBlock * kernelH * nchwcPlainBf16ColumnPairs(kernelW) *
         inChannels;
}

NchwcPackedWeights packNchwcPlainBf16Weights(const float* w, int64_t outChannels,
                                             int64_t inChannels, int64_t kernelH, int64_t kernelW) {
  const int64_t outBlocks = ir::nchwcBlocks(outChannels),
                pairs = nchwcPlainBf16ColumnPairs(kernelW);
  NchwcPackedWeights packed;
  packed.floats = nchwcPlainBf16WeightWords(outChannels, inChannels, kernelH, kernelW);
  packed.data = allocateSharedFloats(packed.floats);  // zeros: padding lanes and odd high halves
  auto* words = reinterpret_cast<uint32_t*>(packed.data.get());
  const int64_t groupWordsPerBlock = kernelH * pairs * inChannels * kNchwcBlock;
  for (int64_t g = 0; g < nchwcOutBlockGroups(outBlocks); ++g) {
    const NchwcBlockRange r = nchwcOutBlockGroup(outBlocks, g);
    const int64_t lanes = (r.end - r.begin) * kNchwcBlock;  // M * 16
    uint32_t* group = words + r.begin * groupWordsPerBlock;
    for (int64_t co = r.begin * kNchwcBlock; co < std::min(outChannels, r.end * kNchwcBlock);
         ++co) {
      const int64_t lane = co - r.begin * kNchwcBlock;
      for (int64_t ky = 0; ky < kernelH; ++ky)
        for (int64_t kp = 0; kp < pairs; ++kp)
          for (int64_t ci = 0; ci < inChannels; ++ci) {
            const float* k = w + ((co * inChannels + ci) * kernelH + ky) * kernelW;
            const uint32_t high = 2 * kp + 1 < kernelW ? floatToBfloat16Bits(k[2 * kp + 1]) : 0;
            group[((ky * pairs + kp) * inChannels + ci) * lanes + lane] =
                floatToBfloat16Bits(k[2 * kp]) | high << 16;
          }
    }
  }
  return packed;
}

uint64_t nchwcPlainConvBf16ScratchBytes(const NchwcConvShape& s) {
  return static_cast<uint64_t>(s.batch * s.inChannels * s.height * nchwcPlainBf16PairWidth(s)) *
         sizeof(uint32_t);
}

uint64_t nchwcConvBf16ScratchBytes(const NchwcConvShape& s) {
  return static_cast<uint64_t>(s.batch * s.inBlocks() * s.height * s.width * kNchwcBlock) *
         sizeof(uint16_t);
}

}  // namespace kiln::cpu
