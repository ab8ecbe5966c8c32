// CPU kernels of the com.microsoft ops that are ONNX ops under another domain
// (ir/ops/contrib_onnx_equivalents.cpp): the ONNX op's kernel (its candidates, packed weights
// included) made for a copy of the node at the ONNX opset, run on the inputs or, for ExpandDims,
// Pad, Range, Unique and ConvTransposeWithDynamicPads, on stand-ins in the ONNX op's form.
// (GridSample is in grid_sample.cpp: the same kernel with torch's cubic padding.)
#include <map>
#include <memory>
#include <mutex>

#include "backends/cpu/kernels/onnx_stage.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {
namespace {

std::vector<ir::TypeInfo> inputTypesOf(const KernelCreateInfo& info) {
  std::vector<ir::TypeInfo> types;
  for (size_t i = 0; i < info.inputTypes.size(); ++i)
    types.push_back(info.inputTypes[i] ? *info.inputTypes[i] : ir::TypeInfo{});
  return types;
}

std::vector<const Tensor*> inputsOf(const KernelContext& ctx) {
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    inputs.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
  return inputs;
}

KernelFactory onnxEquivalent(const char* opType, int64_t opset) {
  return [opType, opset](const KernelCreateInfo& info) -> KernelFn {
    auto stage = std::make_shared<OnnxStage>(info, opType, opset, inputTypesOf(info), nullptr,
                                             info.constants);
    return [stage](KernelContext& ctx) {
      ctx.setOutput(0, stage->run(ctx, inputsOf(ctx), ctx.output(0).dtype()));
    };
  };
}

// Input i as a one-element tensor of `shape` (a view), failing naming it when it holds more.
Tensor oneElement(const KernelContext& ctx, size_t i, const char* what, Shape shape) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(std::string(what) + " must hold one element, got " + t.describe(),
             ErrorCode::kInvalidArgument);
  return t.reshaped(std::move(shape));
}

// ExpandDims: Unsqueeze-13 with the int32 axis as int64 axes [1].
KernelFn makeExpandDims(const KernelCreateInfo& info) {
  std::vector<ir::TypeInfo> types = inputTypesOf(info);
  types.resize(2);
  types[1] = ir::TypeInfo{DataType::kInt64, ir::SymShape{ir::Dim::known(1)}};
  auto stage = std::make_shared<OnnxStage>(info, "Unsqueeze", 13, std::move(types));
  return [stage](KernelContext& ctx) {
    const int64_t axis = oneElement(ctx, 1, "axis", {}).intAt(0);
    const Tensor axes = Tensor::fromVector(DataType::kInt64, {1}, std::vector<int64_t>{axis});
    ctx.setOutput(0, stage->run(ctx, {&ctx.input(0), &axes}, ctx.input(0).dtype()));
  };
}

// Pad: Pad-11 with pads [1, 2 * rank] as [2 * rank] and a one-element value as a scalar.
KernelFn makePad(const KernelCreateInfo& info) {
  auto stage = std::make_shared<OnnxStage>(info, "Pad", 11, inputTypesOf(info));
  return [stage](KernelContext& ctx) {
    const Tensor& padsIn = ctx.input(1);
    const Tensor pads = padsIn.reshaped({padsIn.numel()});
    std::optional<Tensor> value;
    if (ctx.hasInput(2)) value = oneElement(ctx, 2, "value", {});
    ctx.setOutput(0, stage->run(ctx, {&ctx.input(0), &pads, value ? &*value : nullptr},
                                ctx.input(0).dtype()));
  };
}

Tensor one(DataType t) {
  Tensor v(t, {});
  dispatchNumeric(t, "Range", [&](auto tag) { *v.data<typename decltype(tag)::type>() = 1; });
  return v;
}

// Range: Range-11 on scalars, delta 1 when omitted.
KernelFn makeRange(const KernelCreateInfo& info) {
  std::vector<ir::TypeInfo> types = inputTypesOf(info);
  types.resize(3);
  for (ir::TypeInfo& t : types) t = ir::TypeInfo{types[0].dtype, ir::SymShape{}};
  auto stage = std::make_shared<OnnxStage>(info, "Range", 11, std::move(types));
  return [stage](KernelContext& ctx) {
    const DataType t = ctx.input(0).dtype();
    const Tensor start = oneElement(ctx, 0, "start", {}), limit = oneElement(ctx, 1, "limit", {});
    const Tensor delta = ctx.hasInput(2) ? oneElement(ctx, 2, "delta", {}) : one(t);
    ctx.setOutput(0, stage->run(ctx, {&start, &limit, &delta}, t));
  };
}

// Unique: Unique-11 with sorted = 0 (first-occurrence order); its outputs Y, inverse_indices and
// counts are this op's y, idx and counts.
KernelFn makeUnique(const KernelCreateInfo& info) {
  auto stage =
      std::make_shared<OnnxStage>(info, "Unique", 11, inputTypesOf(info), [](ir::Node& node) {
        node.attrs["sorted"] = int64_t{0};
        std::vector<int> outs = node.outputs;
        outs.resize(3, ir::kNoValue);
        node.outputs = {outs[0], ir::kNoValue, outs[1], outs[2]};
      });
  return [stage](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    if (x.rank() != 1) ctx.fail("x must be 1-D, got " + x.describe(), ErrorCode::kInvalidArgument);
    const std::vector<ir::TypeInfo> types = {{x.dtype(), std::nullopt},
                                             {DataType::kInt64, std::nullopt},
                                             {DataType::kInt64, std::nullopt},
                                             {DataType::kInt64, std::nullopt}};
    std::vector<Tensor> outs = stage->runAll({&x}, types);
    ctx.setOutput(0, outs[0]);
    for (size_t i = 1; i < 3 && i < ctx.numOutputs(); ++i)
      if (ctx.wantsOutput(i)) ctx.setOutput(i, outs[i + 1]);
  };
}

// ConvTransposeWithDynamicPads: ConvTranspose-11 on X, W, B with Pads as its pads attribute; one
// kernel per distinct Pads value (made once when Pads is a constant, else on first use).
KernelFn makeConvTransposeWithDynamicPads(const KernelCreateInfo& info) {
  std::vector<ir::TypeInfo> all = inputTypesOf(info);
  all.resize(4);
  std::vector<const Tensor*> constants = info.constants;
  constants.resize(4, nullptr);
  auto makeStage = [node = std::make_shared<ir::Node>(info.node),
                    types = std::vector<ir::TypeInfo>{all[0], all[1], all[3]}](
                       const std::vector<int64_t>& pads, std::vector<const Tensor*> consts) {
    KernelCreateInfo inner{*node, {}, consts, {}, nullptr};
    return std::make_shared<OnnxStage>(
        inner, "ConvTranspose", 11, types, [&pads](ir::Node& n) { n.attrs["pads"] = pads; },
        consts);
  };
  auto run = [](KernelContext& ctx, const OnnxStage& stage) {
    const Tensor* b = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
    ctx.setOutput(0, stage.run(ctx, {&ctx.input(0), &ctx.input(1), b}, ctx.input(0).dtype()));
  };
  if (constants[2]) {
    auto stage =
        makeStage(constants[2]->toInt64Vector(), {constants[0], constants[1], constants[3]});
    return [stage, run](KernelContext& ctx) { run(ctx, *stage); };
  }
  struct Stages {
    std::mutex mutex;
    std::map<std::vector<int64_t>, std::shared_ptr<OnnxStage>> byPads;
  };
  auto stages = std::make_shared<Stages>();
  return [stages, makeStage, run](KernelContext& ctx) {
    const std::vector<int64_t> pads = ctx.input(2).toInt64Vector();
    std::shared_ptr<OnnxStage> stage;
    {
      std::lock_guard<std::mutex> lock(stages->mutex);
      std::shared_ptr<OnnxStage>& s = stages->byPads[pads];
      if (!s) s = makeStage(pads, {nullptr, nullptr, nullptr});
      stage = s;
    }
    run(ctx, *stage);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QuantizeLinear",
                                onnxEquivalent("QuantizeLinear", 21));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "DequantizeLinear",
                                onnxEquivalent("DequantizeLinear", 21));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearConv", onnxEquivalent("QLinearConv", 10));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatherND", onnxEquivalent("GatherND", 11));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Trilu", onnxEquivalent("Trilu", 14));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "ExpandDims", KernelFactory(makeExpandDims));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Pad", KernelFactory(makePad));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Range", KernelFactory(makeRange));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "Unique", KernelFactory(makeUnique));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "ConvTransposeWithDynamicPads",
                                KernelFactory(makeConvTransposeWithDynamicPads));

}  // namespace kiln::cpu
