// Shape and type rules of the com.microsoft ops that are ONNX ops under another domain (version 1):
//   QuantizeLinear, DequantizeLinear   ONNX's at opset 21 (axis; int4, uint4, int16, uint16 types)
//   QLinearConv                        ONNX's (opset 10), channels_last 0 only
//   GatherND                           ONNX's (opset 11), int32 indices too
//   GridSample                         ONNX's (opset 16): 4-D, bilinear / nearest / bicubic
//   Trilu                              ONNX's (opset 14)
// and those that are one on stand-in inputs (onnxruntime's forms of the inputs made ONNX's):
//   ExpandDims  Unsqueeze-13, its int32 scalar axis as int64 axes [1]
//   Pad         Pad-11, pads [1, 2 * rank] as [2 * rank], value [1] as a scalar
//   Range       Range-11, [1]-shaped start / limit / delta as scalars, delta 1 when omitted
//   Unique      Unique-11 with sorted = 0 over a 1-D x: its outputs Y, inverse_indices, counts
//   ConvTransposeWithDynamicPads  ConvTranspose-11 on X, W, B with the int64 Pads input as its
//               pads attribute (Pads is required, as onnxruntime's kernel requires it)
//   MaxpoolWithMask  MaxPool-12's output shape for X (float32, 1 to 3 spatial dims); the mask M
//               int32 of X's rank and spatial dims
// Each runs the ONNX op's rule on a copy of the node at that opset.
#include "core/dtype_dispatch.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// The node's inputs as the ONNX op sees them: one type (dtype kUndefined: omitted) and value
// (known or not) per input.
struct StandIns {
  std::vector<TypeInfo> types;
  std::vector<std::optional<Tensor>> values;
};

StandIns inputsOf(const InferContext& ctx) {
  StandIns in;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    in.types.push_back(ctx.hasInput(i) ? ctx.inputTypeInfo(i) : TypeInfo{});
    const Tensor* v = ctx.inputValue(i);
    in.values.push_back(v ? std::optional<Tensor>(*v) : std::nullopt);
  }
  return in;
}

// Runs the ONNX op's rule on `in`; output k of the ONNX op becomes this node's output
// outputOf[k] (none given: the same index; -1: dropped).
void inferAsOnnx(InferContext& ctx, const char* opType, int64_t opset, const StandIns& in,
                 const std::vector<int>& outputOf = {},
                 const std::function<void(Node&)>& adjust = {}) {
  const OpSchema* schema = OpSchemaRegistry::global().find("", opType, opset);
  if (!schema) ctx.fail(std::string("needs the ") + opType + " shape rule (internal error)");
  Node atOpset = ctx.node();
  atOpset.domain = "";
  atOpset.opset = opset;
  if (adjust) adjust(atOpset);
  std::vector<const TypeInfo*> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < in.types.size(); ++i) {
    types.push_back(in.types[i].dtype != DataType::kUndefined ? &in.types[i] : nullptr);
    values.push_back(in.values[i] ? &*in.values[i] : nullptr);
  }
  std::vector<TypeInfo> outputs(outputOf.empty() ? ctx.numOutputs() : outputOf.size());
  InferContext inner(atOpset, types, values, outputs);
  schema->infer(inner);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const int to = outputOf.empty() ? static_cast<int>(k) : outputOf[k];
    if (to >= 0 && static_cast<size_t>(to) < ctx.numOutputs())
      ctx.setOutputTypeInfo(static_cast<size_t>(to), outputs[k]);
  }
}

void inferAsOnnx(InferContext& ctx, const char* opType, int64_t opset) {
  inferAsOnnx(ctx, opType, opset, inputsOf(ctx));
}

void inferQLinearConv(InferContext& ctx) {
  if (attrInt(ctx.node(), "channels_last", 0) != 0) {
    ctx.fail("attribute 'channels_last' = 1 is not supported (X must be [N, C, ...])",
             ErrorCode::kUnsupportedNode);
  }
  inferAsOnnx(ctx, "QLinearConv", 10);
}

void inferGatherND(InferContext& ctx) {
  StandIns in = inputsOf(ctx);
  const DataType indices = ctx.inputType(1);
  if (indices != DataType::kInt32 && indices != DataType::kInt64)
    ctx.fail("indices must be int32 or int64, got " + dataTypeName(indices));
  in.types[1].dtype = DataType::kInt64;  // the kernel reads either
  in.values[1].reset();
  inferAsOnnx(ctx, "GatherND", 11, in);
}

// Input i as a tensor of `shape` (its element count unchanged).
void reshapeStandIn(StandIns& in, size_t i, const SymShape& shape) {
  in.types[i].shape = shape;
  if (!in.values[i]) return;
  const std::optional<Shape> known = concreteShape(shape);
  if (known && shapeNumel(*known) == in.values[i]->numel()) {
    in.values[i] = in.values[i]->reshaped(*known);
  } else {
    in.values[i].reset();
  }
}

void inferExpandDims(InferContext& ctx) {
  ctx.requireInput(1);
  if (ctx.inputType(1) != DataType::kInt32)
    ctx.fail("axis must be int32, got " + dataTypeName(ctx.inputType(1)));
  const SymShape* axis = ctx.inputShape(1);
  if (axis && !(axis->empty() || (axis->size() == 1 && axis->at(0) == Dim::known(1))))
    ctx.fail("axis must be a scalar, got shape " + symShapeToString(*axis));
  StandIns in = inputsOf(ctx);
  in.types[1] = TypeInfo{DataType::kInt64, SymShape{Dim::known(1)}};
  if (in.values[1])
    in.values[1] =
        Tensor::fromVector(DataType::kInt64, {1}, std::vector<int64_t>{in.values[1]->intAt(0)});
  inferAsOnnx(ctx, "Unsqueeze", 13, in);
}

void inferPad(InferContext& ctx) {
  ctx.requireInput(1);
  StandIns in = inputsOf(ctx);
  if (const SymShape* pads = ctx.inputShape(1);
      pads && pads->size() == 2 && pads->at(0) == Dim::known(1))
    reshapeStandIn(in, 1, SymShape{pads->at(1)});
  if (const SymShape* value = ctx.hasInput(2) ? ctx.inputShape(2) : nullptr;
      value && value->size() == 1) {
    if (value->at(0) != Dim::known(1))
      ctx.fail("value must be a scalar or hold one element, got shape " + symShapeToString(*value));
    reshapeStandIn(in, 2, SymShape{});
  }
  inferAsOnnx(ctx, "Pad", 11, in);
}

const char* const kRangeInputs[] = {"start", "limit", "delta"};

void inferRange(InferContext& ctx) {
  const DataType t = ctx.inputType(0);
  if (t != DataType::kFloat32 && t != DataType::kFloat64 && t != DataType::kInt16 &&
      t != DataType::kInt32 && t != DataType::kInt64) {
    ctx.fail("start must be float32, float64, int16, int32 or int64, got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  }
  StandIns in = inputsOf(ctx);
  in.types.resize(3);
  in.values.resize(3);
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.hasInput(i)) continue;
    const SymShape* s = ctx.inputShape(i);
    if (!s) continue;
    if (s->size() > 1 || (s->size() == 1 && s->at(0) != Dim::known(1)))
      ctx.fail(std::string(kRangeInputs[i]) + " must be a scalar or hold one element, got shape " +
               symShapeToString(*s));
    reshapeStandIn(in, i, SymShape{});
  }
  if (!ctx.hasInput(2)) {  // delta 1
    in.types[2] = TypeInfo{t, SymShape{}};
    Tensor one(t, {});
    dispatchNumeric(t, "Range", [&](auto tag) { *one.data<typename decltype(tag)::type>() = 1; });
    in.values[2] = one;
  }
  inferAsOnnx(ctx, "Range", 11, in);
}

void inferUnique(InferContext& ctx) {
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 1) ctx.fail("x must be 1-D, got shape " + symShapeToString(*x));
  inferAsOnnx(ctx, "Unique", 11, inputsOf(ctx), {0, -1, 1, 2},
              [](Node& node) { node.attrs["sorted"] = int64_t{0}; });
  if (x && ctx.numOutputs() > 1) ctx.setOutput(1, DataType::kInt64, *x);
}

void inferConvTransposeWithDynamicPads(InferContext& ctx) {
  StandIns all = inputsOf(ctx);
  all.types.resize(4);
  all.values.resize(4);
  StandIns in{{all.types[0], all.types[1], all.types[3]},
              {all.values[0], all.values[1], all.values[3]}};
  if (!ctx.hasInput(2))  // optional in the schema, required by onnxruntime's kernel
    ctx.fail("input 'Pads' is required", ErrorCode::kUnsupportedNode);
  if (ctx.inputType(2) != DataType::kInt64)
    ctx.fail("Pads must be int64, got " + dataTypeName(ctx.inputType(2)));
  if (attrString(ctx.node(), "auto_pad", "NOTSET") != "NOTSET")
    ctx.fail("auto_pad with a Pads input is not supported", ErrorCode::kUnsupportedNode);
  const std::optional<std::vector<int64_t>> pads = ctx.inputInts(2);
  if (!pads) {  // known at run time
    const SymShape* x = ctx.inputShape(0);
    if (!x) return ctx.setOutputType(0, ctx.inputType(0));
    return ctx.setOutput(0, ctx.inputType(0), SymShape(x->size(), Dim::unknown()));
  }
  inferAsOnnx(ctx, "ConvTranspose", 11, in, {}, [&](Node& node) { node.attrs["pads"] = *pads; });
}

void inferMaxpoolWithMask(InferContext& ctx) {
  if (ctx.inputType(0) != DataType::kFloat32)
    ctx.fail("X must be float32, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != DataType::kInt32)
    ctx.fail("M must be int32, got " + dataTypeName(ctx.inputType(1)));
  const SymShape* x = ctx.inputShape(0);
  const SymShape* m = ctx.inputShape(1);
  if (x && (x->size() < 3 || x->size() > 5))
    ctx.fail("X must be [N, C, d1] to [N, C, d1, d2, d3], got " + symShapeToString(*x));
  if (x && m) {
    bool fits = m->size() == x->size();
    for (size_t i = 2; fits && i < x->size(); ++i)
      fits = !(*x)[i].isKnown() || !(*m)[i].isKnown() || (*x)[i].value == (*m)[i].value;
    if (!fits)
      ctx.fail("M " + symShapeToString(*m) + " must have X's rank and spatial dims, X " +
               symShapeToString(*x));
  }
  StandIns in = inputsOf(ctx);
  in.types.resize(1);
  in.values.resize(1);
  inferAsOnnx(ctx, "MaxPool", 12, in);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QuantizeLinear", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "QuantizeLinear", 21); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DequantizeLinear", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "DequantizeLinear", 21); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QLinearConv", 1, 1000, inferQLinearConv});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatherND", 1, 1000, inferGatherND});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GridSample", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "GridSample", 16); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Trilu", 1, 1000,
                         [](InferContext& ctx) { inferAsOnnx(ctx, "Trilu", 14); }});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "ExpandDims", 1, 1000, inferExpandDims});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Pad", 1, 1000, inferPad});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Range", 1, 1000, inferRange});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Unique", 1, 1000, inferUnique});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MaxpoolWithMask", 1, 1000, inferMaxpoolWithMask});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "ConvTransposeWithDynamicPads", 1, 1000,
                         inferConvTransposeWithDynamicPads});

}  // namespace kiln::ir
