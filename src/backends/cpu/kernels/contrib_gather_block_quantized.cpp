// CPU kernel of com.microsoft GatherBlockQuantized (ir/ops/contrib_gather_block_quantized.cpp):
// each selected row of the uint8 table dequantized, (q - zero_point) * scale with the scale and
// zero point of the element's block along the last axis; an out-of-range index gives zeros.
#include <algorithm>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {
namespace {

struct GatherBlockAttrs {
  int64_t bits = 4, blockSize = 128;
};

// The `bits`-bit value i of packed bytes (low bits first).
int32_t packedAt(const uint8_t* bytes, int64_t i, int64_t bits) {
  const int64_t perByte = 8 / bits;
  return (bytes[i / perByte] >> ((i % perByte) * bits)) & ((1 << bits) - 1);
}

void gatherBlockQuantized(KernelContext& ctx, const GatherBlockAttrs& a) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  const Tensor* zeros = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const int64_t perByte = 8 / a.bits;
  const int64_t K = data.shape().back() * perByte;  // the values along the quantized (last) axis
  const int64_t blocks = (K + a.blockSize - 1) / a.blockSize,
                zeroBytes = (blocks + perByte - 1) / perByte;
  const int64_t lines =
      K == 0 ? 0 : data.numel() * perByte / K;  // rows of K values, all leading dims
  if (scales.numel() != lines * blocks || (zeros && zeros->numel() != lines * zeroBytes)) {
    ctx.fail("scales " + scales.describe() +
                 (zeros ? " or zero_points " + zeros->describe() : std::string()) +
                 " do not hold " + std::to_string(blocks) + " blocks for each of data's " +
                 std::to_string(lines) + " rows",
             ErrorCode::kInvalidArgument);
  }
  const int64_t rows = data.dim(0), linesPerRow = rows == 0 ? 0 : lines / rows;
  const int32_t defaultZero = 1 << (a.bits - 1);
  float* out = ctx.output(0).data<float>();
  for (int64_t n = 0; n < indices.numel(); ++n) {
    int64_t row = indices.intAt(n);
    if (row < 0) row += rows;
    float* dst = out + n * linesPerRow * K;
    if (row < 0 || row >= rows) {  // onnxruntime: an index out of range gives zeros
      std::fill(dst, dst + linesPerRow * K, 0.0f);
      continue;
    }
    for (int64_t l = row * linesPerRow; l < (row + 1) * linesPerRow; ++l) {
      for (int64_t k = 0; k < K; ++k) {
        const int64_t b = k / a.blockSize;
        const int32_t zero =
            zeros ? packedAt(zeros->data<uint8_t>() + l * zeroBytes, b, a.bits) : defaultZero;
        *dst++ = static_cast<float>(packedAt(data.data<uint8_t>(), l * K + k, a.bits) - zero) *
                 scales.data<float>()[l * blocks + b];
      }
    }
  }
}

KernelFn makeGatherBlockQuantizedKernel(const KernelCreateInfo& info) {
  GatherBlockAttrs a;
  a.bits = ir::attrInt(info.node, "bits", 4);
  a.blockSize = ir::attrInt(info.node, "block_size", 128);
  return [a](KernelContext& ctx) { gatherBlockQuantized(ctx, a); };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatherBlockQuantized",
                                KernelFactory(makeGatherBlockQuantizedKernel));

}  // namespace kiln::cpu
