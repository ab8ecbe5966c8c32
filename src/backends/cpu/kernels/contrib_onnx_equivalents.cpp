// CPU kernels of the com.microsoft ops that are ONNX ops under another domain
// (ir/ops/contrib_onnx_equivalents.cpp): the ONNX op's kernel (its candidates, packed weights
// included) made for a copy of the node at the ONNX opset.
#include <memory>

#include "backends/cpu/kernels/onnx_stage.h"

namespace kiln::cpu {
namespace {

KernelFactory onnxEquivalent(const char* opType, int64_t opset) {
  return [opType, opset](const KernelCreateInfo& info) -> KernelFn {
    std::vector<ir::TypeInfo> types;
    for (size_t i = 0; i < info.inputTypes.size(); ++i) {
      types.push_back(info.inputTypes[i] ? *info.inputTypes[i] : ir::TypeInfo{});
    }
    auto stage =
        std::make_shared<OnnxStage>(info, opType, opset, std::move(types), nullptr, info.constants);
    return [stage](KernelContext& ctx) {
      std::vector<const Tensor*> inputs;
      for (size_t i = 0; i < ctx.numInputs(); ++i)
        inputs.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
      ctx.setOutput(0, stage->run(ctx, inputs, ctx.output(0).dtype()));
    };
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QuantizeLinear",
                                onnxEquivalent("QuantizeLinear", 21));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "DequantizeLinear",
                                onnxEquivalent("DequantizeLinear", 21));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearConv", onnxEquivalent("QLinearConv", 10));

}  // namespace kiln::cpu
