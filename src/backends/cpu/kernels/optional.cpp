// CPU kernels of the optional ops (opset 15+). A present optional is its element itself (a tensor
// or a sequence) and an empty one is Tensor::none, so wrapping and unwrapping pass the value on.
#include "backends/cpu/kernel.h"
#include "ir/ops/value_type_text.h"

namespace kiln::cpu {
namespace {

KernelFn makeOptional(const KernelCreateInfo& info) {
  if (info.node.inputs.empty() || info.node.inputs[0] == ir::kNoValue) {
    // No input: an empty optional of the `type` attribute (the schema has checked it).
    const ir::TypeInfo type = ir::parseValueTypeText(info.node, ir::attrString(info.node, "type"));
    return
        [type](KernelContext& ctx) { ctx.setOutput(0, Tensor::none(type.dtype, type.isSequence)); };
  }
  return [](KernelContext& ctx) { ctx.setOutput(0, ctx.input(0)); };
}

void optionalHasElementKernel(KernelContext& ctx) {
  const bool present = ctx.hasInput(0) && !ctx.input(0).isNone();
  ctx.setOutput(0,
                Tensor::fromVector<uint8_t>(DataType::kBool, {}, {static_cast<uint8_t>(present)}));
}

void optionalGetElementKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.isNone())
    ctx.fail("input is an empty optional (" + x.describe() + ")", ErrorCode::kInvalidArgument);
  ctx.setOutput(0, x);
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("Optional", KernelFactory(makeOptional));
KILN_REGISTER_CPU_KERNEL("OptionalHasElement", optionalHasElementKernel);
KILN_REGISTER_CPU_KERNEL("OptionalGetElement", optionalGetElementKernel);

}  // namespace kiln::cpu
