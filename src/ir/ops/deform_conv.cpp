// Shape rules of DeformConv (opsets 19, 22), 2-D: X (N, C, H, W), W (M, C / group, kH, kW),
// offset (N, offset_group * 2 * kH * kW, oH, oW) -> Y (N, M, oH, oW), oH/oW as for Conv.
#include <limits>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferDeformConv(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("X must be a float tensor, got " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (x && x->size() != 4)
    ctx.fail("only 2-D deformable convolution (4-D X) is supported, got " + symShapeToString(*x),
             ErrorCode::kUnsupportedNode);
  if (w && w->size() != 4) ctx.fail("W must be 4-D, got " + symShapeToString(*w));
  if (!x || !w) {
    ctx.setOutputType(0, type);
    return;
  }
  std::vector<int64_t> kernel = attrInts(ctx.node(), "kernel_shape", {});
  if (kernel.empty() && (*w)[2].isKnown() && (*w)[3].isKnown())
    kernel = {(*w)[2].value, (*w)[3].value};
  const std::vector<int64_t> strides = attrInts(ctx.node(), "strides", {1, 1});
  const std::vector<int64_t> dilations = attrInts(ctx.node(), "dilations", {1, 1});
  const std::vector<int64_t> pads = attrInts(ctx.node(), "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    ctx.fail("strides and dilations need 2 values and pads 4");
  for (size_t i = 0; i < 2; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + 2] < 0 ||
        (i < kernel.size() && kernel[i] <= 0))
      ctx.fail("strides, dilations and kernel_shape must be positive and pads not negative");
  }
  SymShape out{(*x)[0], (*w)[0], Dim::unknown(), Dim::unknown()};
  for (size_t i = 0; i < 2 && kernel.size() == 2; ++i) {
    const Dim& in = (*x)[2 + i];
    if (!in.isKnown()) continue;
    // In 128 bits: attributes and dims as large as int64 holds.
    using Wide = __int128;
    const Wide span = Wide{kernel[i] - 1} * dilations[i] + 1;
    const Wide size = (Wide{in.value} + pads[i] + pads[i + 2] - span) / strides[i] + 1;
    if (size < 1) ctx.fail("the kernel does not fit the padded input");
    if (size > std::numeric_limits<int64_t>::max())
      ctx.fail("the output size of spatial axis " + std::to_string(i) + " is past int64");
    out[2 + i] = Dim::known(static_cast<int64_t>(size));
  }
  ctx.setOutput(0, type, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "DeformConv", 19, 1000, inferDeformConv});

}  // namespace kiln::ir
