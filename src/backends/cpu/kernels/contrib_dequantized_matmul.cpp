#include "backends/cpu/kernels/contrib_dequantized_matmul.h"

#include <memory>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

bool present(const ir::Node& node, size_t i) {
  return i < node.inputs.size() && node.inputs[i] != ir::kNoValue;
}

bool allConstant(const KernelCreateInfo& info, const std::vector<size_t>& inputs) {
  for (size_t i : inputs) {
    if (present(info.node, i) && (i >= info.constants.size() || !info.constants[i])) return false;
  }
  return true;
}

}  // namespace

KernelFn makeDequantizedMatMul(const KernelCreateInfo& info, DequantizedMatMul spec) {
  std::shared_ptr<const Tensor> weights;
  if (allConstant(info, spec.weightInputs)) {
    std::vector<const Tensor*> values;
    for (size_t i : spec.weightInputs)
      values.push_back(present(info.node, i) ? info.constants[i] : nullptr);
    weights = std::make_shared<const Tensor>(spec.dequantize(info.node, values));
    for (size_t i : spec.weightInputs) info.keepsOwnCopyOf(i);
  }
  auto types = std::make_shared<std::vector<ir::TypeInfo>>(
      std::vector{*info.inputTypes[0],
                  ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(Shape{spec.K, spec.N})}});
  const KernelFactory* factory = KernelRegistry::global().find("", "MatMul");
  if (!factory) ir::failNode(info.node, "needs the MatMul CPU kernel (internal error)");
  KernelFn matmul = (*factory)(KernelCreateInfo{
      info.node, {&(*types)[0], &(*types)[1]}, {nullptr, weights.get()}, {}, info.subgraphs});
  return [matmul, weights, types, spec, label = nodeLabel(info.node)](KernelContext& ctx) {
    std::shared_ptr<const Tensor> w = weights;
    if (!w) {
      std::vector<const Tensor*> values;
      for (size_t i : spec.weightInputs)
        values.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
      w = std::make_shared<const Tensor>(spec.dequantize(label, values));
    }
    Tensor& y = ctx.output(0);
    std::vector<Tensor> outputs(1);
    const std::vector<ir::TypeInfo> outTypes = {
        ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(y.shape())}};
    KernelContext product(ctx, {&ctx.input(0), w.get()}, outputs, outTypes);
    matmul(product);
    if (spec.biasInput != DequantizedMatMul::kNoBias && ctx.hasInput(spec.biasInput)) {
      const Tensor& bias = ctx.input(spec.biasInput);
      if (bias.numel() != spec.N)
        ctx.fail("bias " + bias.describe() + " must hold N = " + std::to_string(spec.N) + " values",
                 ErrorCode::kInvalidArgument);
      float* p = outputs[0].data<float>();
      for (int64_t i = 0; i < outputs[0].numel(); ++i) p[i] += bias.data<float>()[i % spec.N];
    }
    ctx.setOutput(0, outputs[0]);
  };
}

}  // namespace kiln::cpu
