// CPU kernels of com.microsoft FusedGemm and FusedMatMul (ir/ops/contrib_fused_products.cpp),
// float32: the Gemm and MatMul kernels (their packed-weight candidates included), made for the node
// itself, then the activation (FusedGemm) or alpha (FusedMatMul) over the output. FusedMatMul's
// transposed operands are transposed first: constants once, when the kernel is made.
#include <memory>
#include <optional>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu {
namespace {

KernelFn onnxKernel(const KernelCreateInfo& info, const char* opType) {
  const KernelFactory* factory = KernelRegistry::global().find("", opType);
  if (!factory)
    ir::failNode(info.node, std::string("needs the ") + opType + " CPU kernel (internal error)");
  return (*factory)(info);
}

// ONNX Runtime's activation attributes, with its defaults (LeakyRelu 0.01, HardSigmoid 0.2 and
// 0.5).
Activation gemmActivation(const ir::Node& node) {
  const std::string name = ir::attrString(node, "activation", "");
  if (name == "Relu") return {ActivationKind::kRelu};
  if (name == "Sigmoid") return {ActivationKind::kSigmoid};
  if (name == "LeakyRelu")
    return {ActivationKind::kLeakyRelu, ir::attrFloat(node, "activation_alpha", 0.01f)};
  if (name == "HardSigmoid") {
    return {ActivationKind::kHardSigmoid, ir::attrFloat(node, "activation_alpha", 0.2f),
            ir::attrFloat(node, "activation_beta", 0.5f)};
  }
  ir::failNode(node, "attribute 'activation' = '" + name + "' is not supported",
               ErrorCode::kUnsupportedNode);
}

KernelFn makeFusedGemmKernel(const KernelCreateInfo& info) {
  const Activation act = gemmActivation(info.node);
  KernelFn gemm = onnxKernel(info, "Gemm");
  return [gemm, act](KernelContext& ctx) {
    gemm(ctx);
    Tensor& y = ctx.output(0);
    applyActivationInParallel(act, y.data<float>(), y.data<float>(), y.numel());
  };
}

// x with its last two dimensions swapped.
Tensor transposeLastTwo(const Tensor& x) {
  Shape shape = x.shape();
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  std::swap(shape[shape.size() - 2], shape.back());
  Tensor t(DataType::kFloat32, shape);
  const float* src = x.data<float>();
  float* dst = t.data<float>();
  for (int64_t m = 0; m < (rows * cols == 0 ? 0 : x.numel() / (rows * cols)); ++m) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        dst[m * rows * cols + c * rows + r] = src[m * rows * cols + r * cols + c];
  }
  return t;
}

// What MatMul sees of operand i: the node's, or its transpose (a constant's made here).
struct MatMulOperand {
  bool transposed = false;
  ir::TypeInfo type;
  std::shared_ptr<const Tensor> constant;
};

MatMulOperand matmulOperand(const KernelCreateInfo& info, size_t i, bool transposed) {
  MatMulOperand o;
  o.transposed = transposed;
  const ir::TypeInfo* t = info.inputTypes[i];
  if (!t) ir::failNode(info.node, "input " + std::to_string(i) + " has no type");
  o.type = *t;
  if (!transposed) return o;
  if (o.type.shape && o.type.shape->size() >= 2)
    std::swap((*o.type.shape)[o.type.shape->size() - 1], (*o.type.shape)[o.type.shape->size() - 2]);
  if (i < info.constants.size() && info.constants[i])
    o.constant = std::make_shared<const Tensor>(transposeLastTwo(*info.constants[i]));
  return o;
}

KernelFn makeFusedMatMulKernel(const KernelCreateInfo& info) {
  const float alpha = ir::attrFloat(info.node, "alpha", 1.0f);
  const auto a = std::make_shared<MatMulOperand>(
      matmulOperand(info, 0, ir::attrInt(info.node, "transA", 0) != 0));
  const auto b = std::make_shared<MatMulOperand>(
      matmulOperand(info, 1, ir::attrInt(info.node, "transB", 0) != 0));
  KernelCreateInfo inner{info.node, {&a->type, &b->type}, {}, {}, info.subgraphs};
  for (const auto& [i, o] : {std::pair{size_t{0}, a}, std::pair{size_t{1}, b}}) {
    inner.constants.push_back(o->transposed               ? o->constant.get()
                              : i < info.constants.size() ? info.constants[i]
                                                          : nullptr);
  }
  KernelFn matmul = onnxKernel(inner, "MatMul");
  return [matmul, alpha, a, b](KernelContext& ctx) {
    std::optional<Tensor> ta, tb;
    auto operand = [&](size_t i, const MatMulOperand& o,
                       std::optional<Tensor>& t) -> const Tensor* {
      if (!o.transposed) return &ctx.input(i);
      if (o.constant) return o.constant.get();
      if (ctx.input(i).rank() < 2)
        ctx.fail("a transposed operand must have rank 2 or more", ErrorCode::kInvalidArgument);
      t = transposeLastTwo(ctx.input(i));
      return &*t;
    };
    std::vector<Tensor> outputs(1);
    const std::vector<ir::TypeInfo> types = {
        ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(ctx.output(0).shape())}};
    KernelContext product(ctx, {operand(0, *a, ta), operand(1, *b, tb)}, outputs, types);
    matmul(product);
    Tensor& y = ctx.output(0);
    const float* src = outputs[0].data<float>();
    float* dst = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) dst[i] = alpha * src[i];
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "FusedGemm", KernelFactory(makeFusedGemmKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "FusedMatMul",
                                KernelFactory(makeFusedMatMulKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "TransposeMatMul",
                                KernelFactory(makeFusedMatMulKernel));

}  // namespace kiln::cpu
