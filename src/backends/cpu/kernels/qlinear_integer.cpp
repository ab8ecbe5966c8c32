#include "backends/cpu/kernels/qlinear_integer.h"

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {

IntegerStage::IntegerStage(const KernelCreateInfo& info, const char* integerOp,
                           std::vector<size_t> picks,
                           const std::vector<const ir::TypeInfo*>& standInTypes)
    : picks_(std::move(picks)) {
  const KernelFactory* factory = KernelRegistry::global().find("", integerOp);
  if (!factory)
    ir::failNode(info.node, std::string("needs the ") + integerOp + " CPU kernel (internal error)");
  KernelCreateInfo inner{info.node, {}, {}, {}, info.subgraphs};
  for (size_t k = 0; k < picks_.size(); ++k) {
    const size_t i = picks_[k];
    const bool standsIn = k < standInTypes.size() && standInTypes[k];
    inner.inputTypes.push_back(standsIn                     ? standInTypes[k]
                               : i < info.inputTypes.size() ? info.inputTypes[i]
                                                            : nullptr);
    inner.constants.push_back(!standsIn && i < info.constants.size() ? info.constants[i] : nullptr);
  }
  kernel_ = (*factory)(inner);
}

Tensor IntegerStage::run(const KernelContext& ctx, const Shape& shape) const {
  return run(ctx, shape, {});
}

Tensor IntegerStage::run(const KernelContext& ctx, const Shape& shape, size_t pick,
                         const Tensor& standIn) const {
  std::vector<const Tensor*> standIns(picks_.size(), nullptr);
  if (pick < standIns.size()) standIns[pick] = &standIn;
  return run(ctx, shape, standIns);
}

Tensor IntegerStage::run(const KernelContext& ctx, const Shape& shape,
                         const std::vector<const Tensor*>& standIns) const {
  std::vector<const Tensor*> inputs;
  for (size_t k = 0; k < picks_.size(); ++k) {
    const size_t i = picks_[k];
    const Tensor* standIn = k < standIns.size() ? standIns[k] : nullptr;
    inputs.push_back(standIn ? standIn : ctx.hasInput(i) ? &ctx.input(i) : nullptr);
  }
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> types = {ir::TypeInfo{DataType::kInt32, ir::symShapeOf(shape)}};
  KernelContext inner(ctx, std::move(inputs), outputs, types);
  kernel_(inner);
  return outputs[0];
}

std::vector<double> qlinearParams(const KernelContext& ctx, size_t input, const char* name,
                                  int64_t count) {
  const Tensor& t = ctx.input(input);
  if (t.numel() != 1 && (t.rank() != 1 || t.numel() != count)) {
    ctx.fail(std::string(name) + " (input " + std::to_string(input) + ") must hold one value" +
                 (count > 1 ? " or " + std::to_string(count) + " values in a 1-D tensor"
                            : std::string()) +
                 ", got " + t.describe(),
             ErrorCode::kInvalidArgument);
  }
  return valuesAsDouble(&t, 0.0);
}

}  // namespace kiln::cpu
