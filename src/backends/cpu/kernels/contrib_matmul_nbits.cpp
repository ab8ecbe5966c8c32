// CPU kernel of com.microsoft MatMulNBits (ir/ops/contrib_matmul_nbits.cpp): the weights
// dequantized to a float32 [K, N] matrix (once, when the kernel is made, for constant weights),
// then the MatMul kernel (whose packed-weight candidate packs that matrix), plus the bias.
#include <memory>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/node_label.h"

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

bool allConstant(const KernelCreateInfo& info) {
  for (size_t i : {1, 2, 3}) {
    const bool present = i < info.node.inputs.size() && info.node.inputs[i] != ir::kNoValue;
    if (present && (i >= info.constants.size() || !info.constants[i])) return false;
  }
  return true;
}

KernelFn makeMatMulNBitsKernel(const KernelCreateInfo& info) {
  NBitsLayout l;
  l.K = ir::attrInt(info.node, "K");
  l.N = ir::attrInt(info.node, "N");
  l.bits = ir::attrInt(info.node, "bits", 4);
  l.blockSize = ir::attrInt(info.node, "block_size");
  l.blocks = (l.K + l.blockSize - 1) / l.blockSize;
  std::shared_ptr<const Tensor> weights;
  const bool hasZeros = info.node.inputs.size() > 3 && info.node.inputs[3] != ir::kNoValue;
  if (allConstant(info)) {
    weights = std::make_shared<const Tensor>(
        dequantizeWeights(info.node, l, *info.constants[1], *info.constants[2],
                          hasZeros ? info.constants[3] : nullptr));
    for (size_t i : {1, 2, 3}) info.keepsOwnCopyOf(i);
  }
  auto types = std::make_shared<std::vector<ir::TypeInfo>>(std::vector{
      *info.inputTypes[0], ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(Shape{l.K, l.N})}});
  const KernelFactory* factory = KernelRegistry::global().find("", "MatMul");
  if (!factory) ir::failNode(info.node, "needs the MatMul CPU kernel (internal error)");
  KernelFn matmul = (*factory)(KernelCreateInfo{
      info.node, {&(*types)[0], &(*types)[1]}, {nullptr, weights.get()}, {}, info.subgraphs});
  return [matmul, weights, types, l, label = nodeLabel(info.node)](KernelContext& ctx) {
    std::shared_ptr<const Tensor> w = weights;
    if (!w) {
      w = std::make_shared<const Tensor>(dequantizeWeights(
          label, l, ctx.input(1), ctx.input(2), ctx.hasInput(3) ? &ctx.input(3) : nullptr));
    }
    Tensor& y = ctx.output(0);
    std::vector<Tensor> outputs(1);
    const std::vector<ir::TypeInfo> outTypes = {
        ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(y.shape())}};
    KernelContext product(ctx, {&ctx.input(0), w.get()}, outputs, outTypes);
    matmul(product);
    if (ctx.hasInput(5)) {
      const Tensor& bias = ctx.input(5);
      if (bias.numel() != l.N)
        ctx.fail("bias " + bias.describe() + " must hold N = " + std::to_string(l.N) + " values",
                 ErrorCode::kInvalidArgument);
      float* p = outputs[0].data<float>();
      for (int64_t i = 0; i < outputs[0].numel(); ++i) p[i] += bias.data<float>()[i % l.N];
    }
    ctx.setOutput(0, outputs[0]);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulNBits",
                                KernelFactory(makeMatMulNBitsKernel));

}  // namespace kiln::cpu
