// CPU kernel of com.microsoft MatMulNBits (ir/ops/contrib_matmul_nbits.cpp): the weights
// dequantized to a float32 [K, N] matrix, then the MatMul kernel, plus the bias
// (contrib_dequantized_matmul.h).
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/contrib_dequantized_matmul.h"

namespace kiln::cpu {
namespace {

struct NBitsLayout {
  int64_t K = 0, N = 0, bits = 4, blockSize = 0, blocks = 0;
};

// The `bits`-bit value e of a packed row (low bits first).
int32_t packedValue(const uint8_t* row, int64_t e, int64_t bits) {
  const int64_t perByte = 8 / bits;
  return (row[e / perByte] >> ((e % perByte) * bits)) & ((1 << bits) - 1);
}

// W^T [K, N] of B, scales and zero points (inputs 1, 2, 3).
Tensor dequantizeWeights(const ir::Node& node, const NBitsLayout& l, const Tensor& b,
                         const Tensor& scales, const Tensor* zeros) {
  const int64_t blob = l.blockSize * l.bits / 8;
  if (b.numel() != l.N * l.blocks * blob || scales.numel() != l.N * l.blocks) {
    ir::failNode(node,
                 "B " + b.describe() + " or scales " + scales.describe() +
                     " do not hold N x blocks (" + std::to_string(l.N) + " x " +
                     std::to_string(l.blocks) + ") blocks",
                 ErrorCode::kInvalidArgument);
  }
  const int64_t zeroBytesPerRow = (l.blocks * l.bits + 7) / 8;
  const bool packedZeros = zeros && zeros->dtype() == DataType::kUint8;
  if (zeros && zeros->numel() != (packedZeros ? l.N * zeroBytesPerRow : l.N * l.blocks)) {
    ir::failNode(node, "zero_points " + zeros->describe() + " do not fit B's blocks",
                 ErrorCode::kInvalidArgument);
  }
  if (zeros && !packedZeros && zeros->dtype() != DataType::kFloat32) {
    ir::failNode(node, "zero_points must be uint8 (packed) or float32, got " + zeros->describe(),
                 ErrorCode::kUnsupportedNode);
  }
  Tensor w(DataType::kFloat32, Shape{l.K, l.N});
  float* out = w.data<float>();
  const uint8_t* q = b.data<uint8_t>();
  const float* s = scales.data<float>();
  const float defaultZero = static_cast<float>(1 << (l.bits - 1));
  for (int64_t n = 0; n < l.N; ++n) {
    for (int64_t kb = 0; kb < l.blocks; ++kb) {
      float zero = defaultZero;
      if (packedZeros)
        zero = static_cast<float>(
            packedValue(zeros->data<uint8_t>() + n * zeroBytesPerRow, kb, l.bits));
      if (zeros && !packedZeros) zero = zeros->data<float>()[n * l.blocks + kb];
      const float scale = s[n * l.blocks + kb];
      const uint8_t* row = q + (n * l.blocks + kb) * blob;
      for (int64_t j = 0; j < l.blockSize && kb * l.blockSize + j < l.K; ++j) {
        out[(kb * l.blockSize + j) * l.N + n] =
            (static_cast<float>(packedValue(row, j, l.bits)) - zero) * scale;
      }
    }
  }
  return w;
}

KernelFn makeMatMulNBitsKernel(const KernelCreateInfo& info) {
  NBitsLayout l;
  l.K = ir::attrInt(info.node, "K");
  l.N = ir::attrInt(info.node, "N");
  l.bits = ir::attrInt(info.node, "bits", 4);
  l.blockSize = ir::attrInt(info.node, "block_size");
  l.blocks = (l.K + l.blockSize - 1) / l.blockSize;
  DequantizedMatMul spec;
  spec.weightInputs = {1, 2, 3};
  spec.K = l.K;
  spec.N = l.N;
  spec.biasInput = 5;
  spec.dequantize = [l](const ir::Node& label, const std::vector<const Tensor*>& w) {
    return dequantizeWeights(label, l, *w[0], *w[1], w[2]);
  };
  return makeDequantizedMatMul(info, std::move(spec));
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulNBits",
                                KernelFactory(makeMatMulNBitsKernel));

}  // namespace kiln::cpu
