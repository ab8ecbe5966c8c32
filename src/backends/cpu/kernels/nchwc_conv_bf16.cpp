#include "backends/cpu/kernels/nchwc_conv_bf16.h"

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

uint64_t nchwcConvBf16ScratchBytes(const NchwcConvShape& s) {
  return static_cast<uint64_t>(s.batch * s.inBlocks() * s.height * s.width * kNchwcBlock) *
         sizeof(uint16_t);
}

}  // namespace kiln::cpu
