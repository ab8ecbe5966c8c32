// Shape and type rules of Cast and CastLike.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// Fails for element types a kiln tensor cannot hold (complex, float6, ...).
void requireCastableType(InferContext& ctx, DataType to) {
  if (!isSupportedDataType(to) || to == DataType::kComplex64 || to == DataType::kComplex128) {
    ctx.fail("cannot cast to element type " + std::to_string(static_cast<int>(to)) +
                 " (kiln does not support complex and float6 tensors)",
             ErrorCode::kUnsupportedNode);
  }
}

void setCastOutput(InferContext& ctx, DataType to) {
  requireCastableType(ctx, to);
  const DataType from = ctx.inputType(0);
  requireCastableType(ctx, from);
  if ((isLowPrecision(from) && to == DataType::kString) ||
      (from == DataType::kString && isLowPrecision(to))) {
    ctx.fail("cannot cast " + dataTypeName(from) + " to " + dataTypeName(to),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.opset() >= 24 && isLowPrecision(to)) {
    const std::string mode = attrString(ctx.node(), "round_mode", "up");
    if (mode != "up" && mode != "down" && mode != "nearest") {
      ctx.fail("round_mode must be 'up', 'down' or 'nearest', got '" + mode + "'");
    }
  }
  const SymShape* s = ctx.inputShape(0);
  if (s)
    ctx.setOutput(0, to, *s);
  else
    ctx.setOutputType(0, to);
}

// Cast-1 names the target type with a string ("FLOAT"); later versions use the TensorProto enum.
DataType castTarget(InferContext& ctx) {
  auto it = ctx.node().attrs.find("to");
  if (it != ctx.node().attrs.end()) {
    if (const std::string* name = std::get_if<std::string>(&it->second)) {
      static const std::pair<const char*, DataType> kNames[] = {
          {"FLOAT", DataType::kFloat32},  {"UINT8", DataType::kUint8},
          {"INT8", DataType::kInt8},      {"UINT16", DataType::kUint16},
          {"INT16", DataType::kInt16},    {"INT32", DataType::kInt32},
          {"INT64", DataType::kInt64},    {"STRING", DataType::kString},
          {"BOOL", DataType::kBool},      {"FLOAT16", DataType::kFloat16},
          {"DOUBLE", DataType::kFloat64}, {"UINT32", DataType::kUint32},
          {"UINT64", DataType::kUint64}};
      for (const auto& [n, t] : kNames) {
        if (*name == n) return t;
      }
      ctx.fail("attribute 'to' names an unsupported type '" + *name + "'",
               ErrorCode::kUnsupportedNode);
    }
  }
  return static_cast<DataType>(attrInt(ctx.node(), "to"));
}

void inferCast(InferContext& ctx) { setCastOutput(ctx, castTarget(ctx)); }

void inferCastLike(InferContext& ctx) { setCastOutput(ctx, ctx.inputType(1)); }

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Cast", 1, 1000, inferCast});
KILN_REGISTER_OP_SCHEMA({"", "CastLike", 15, 1000, inferCastLike});

}  // namespace kiln::ir
