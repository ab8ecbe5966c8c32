// Shape and type rule of com.microsoft NhwcMaxPool (version 1), the channels-last 8-bit MaxPool of
// ONNX Runtime's optimized QDQ models: x [N, spatial..., C] int8 or uint8, MaxPool's attributes
// (kernel_shape, pads, strides, dilations, ceil_mode, auto_pad), y [N, spatial'..., C].
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// [N, d1, ..., C] <-> [N, C, d1, ...].
SymShape channelsFirst(const SymShape& s) {
  SymShape out{s[0], s.back()};
  out.insert(out.end(), s.begin() + 1, s.end() - 1);
  return out;
}

SymShape channelsLast(const SymShape& s) {
  SymShape out{s[0]};
  out.insert(out.end(), s.begin() + 2, s.end());
  out.push_back(s[1]);
  return out;
}

void inferNhwcMaxPool(InferContext& ctx) {
  ctx.requireInput(0);
  const DataType t = ctx.inputType(0);
  if (t != DataType::kInt8 && t != DataType::kUint8)
    ctx.fail("x must be int8 or uint8, got " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, t);
  if (x->size() < 3) ctx.fail("x must be [N, spatial..., C], got " + symShapeToString(*x));
  const OpSchema* maxPool = OpSchemaRegistry::global().find("", "MaxPool", 12);
  if (!maxPool) ctx.fail("needs the MaxPool shape rule (internal error)");
  Node atOpset = ctx.node();
  atOpset.opset = 12;
  const TypeInfo nchw{t, channelsFirst(*x)};
  std::vector<TypeInfo> outputs(1);
  InferContext inner(atOpset, {&nchw}, {nullptr}, outputs);
  maxPool->infer(inner);
  if (!outputs[0].shape) return ctx.setOutputType(0, t);
  ctx.setOutput(0, t, channelsLast(*outputs[0].shape));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "NhwcMaxPool", 1, 1000, inferNhwcMaxPool});

}  // namespace kiln::ir
