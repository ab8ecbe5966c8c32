// Shape and type rules of the com.microsoft ops that are ONNX ops under another domain (version 1):
//   QuantizeLinear, DequantizeLinear   ONNX's at opset 21 (axis; int4, uint4, int16, uint16 types)
//   QLinearConv                        ONNX's (opset 10), channels_last 0 only
// Each runs the ONNX op's rule on a copy of the node at that opset.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferAsOnnx(InferContext& ctx, const char* opType, int64_t opset) {
  const OpSchema* schema = OpSchemaRegistry::global().find("", opType, opset);
  if (!schema) ctx.fail(std::string("needs the ") + opType + " shape rule (internal error)");
  Node atOpset = ctx.node();
  atOpset.domain = "";
  atOpset.opset = opset;
  std::vector<const TypeInfo*> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    types.push_back(ctx.hasInput(i) ? &ctx.inputTypeInfo(i) : nullptr);
    values.push_back(ctx.inputValue(i));
  }
  std::vector<TypeInfo> outputs(ctx.numOutputs());
  InferContext inner(atOpset, types, values, outputs);
  schema->infer(inner);
  for (size_t i = 0; i < outputs.size(); ++i) ctx.setOutputTypeInfo(i, outputs[i]);
}

void inferQLinearConv(InferContext& ctx) {
  if (attrInt(ctx.node(), "channels_last", 0) != 0) {
    ctx.fail("attribute 'channels_last' = 1 is not supported (X must be [N, C, ...])",
             ErrorCode::kUnsupportedNode);
  }
  inferAsOnnx(ctx, "QLinearConv", 10);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QuantizeLinear", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "QuantizeLinear", 21); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DequantizeLinear", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "DequantizeLinear", 21); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearConv", 1, 1000, inferQLinearConv});

}  // namespace kiln::ir
