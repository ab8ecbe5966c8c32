#include "ir/shape_helpers.h"

namespace kiln::ir {

int64_t multiplyDims(const Node& node, int64_t a, int64_t b, const std::string& what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) {
    failNode(node,
             what + " would be " + std::to_string(a) + " x " + std::to_string(b) + ", past int64",
             ErrorCode::kInvalidArgument);
  }
  return product;
}

int64_t addDims(const Node& node, int64_t a, int64_t b, const std::string& what) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    failNode(node,
             what + " would be " + std::to_string(a) + " + " + std::to_string(b) + ", past int64",
             ErrorCode::kInvalidArgument);
  }
  return sum;
}

Dim sumDims(const Node& node, const Dim& a, const Dim& b, const std::string& what) {
  return a.isKnown() && b.isKnown() ? Dim::known(addDims(node, a.value, b.value, what))
                                    : Dim::unknown();
}

Dim productDims(const Node& node, const Dim& a, int64_t b, const std::string& what) {
  return a.isKnown() ? Dim::known(multiplyDims(node, a.value, b, what)) : Dim::unknown();
}

bool axisInRange(int64_t axis, int64_t rank) {
  return axis >= -rank && axis < rank;
}  // a scalar has none

std::string axisRangeMessage(int64_t axis, int64_t rank) {
  return "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank);
}

int64_t normalizeAxis(const Node& node, int64_t axis, int64_t rank) {
  if (!axisInRange(axis, rank)) failNode(node, axisRangeMessage(axis, rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t normalizeAxis(const InferContext& ctx, int64_t axis, int64_t rank) {
  return normalizeAxis(ctx.node(), axis, rank);
}

SymShape broadcastSymShapes(const InferContext& ctx, const SymShape& a, const SymShape& b) {
  size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i + a.size() >= rank ? &a[i + a.size() - rank] : nullptr;
    const Dim* db = i + b.size() >= rank ? &b[i + b.size() - rank] : nullptr;
    if (!da) {
      out[i] = *db;
      continue;
    }
    if (!db) {
      out[i] = *da;
      continue;
    }
    if (da->isKnown() && da->value == 1) {
      out[i] = *db;
      continue;
    }
    if (db->isKnown() && db->value == 1) {
      out[i] = *da;
      continue;
    }
    if (da->isKnown() && db->isKnown()) {
      if (da->value != db->value) {
        ctx.fail("cannot broadcast shapes " + symShapeToString(a) + " and " + symShapeToString(b));
      }
      out[i] = *da;
    } else if (*da == *db) {
      out[i] = *da;
    } else {
      out[i] = da->isKnown() ? *da : (db->isKnown() ? *db : Dim::unknown());
    }
  }
  return out;
}

std::optional<Shape> tryBroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string broadcastMessage(const Shape& a, const Shape& b) {
  return "cannot broadcast shapes " + shapeToString(a) + " and " + shapeToString(b);
}

Shape broadcastShapes(const Node& node, const Shape& a, const Shape& b) {
  std::optional<Shape> out = tryBroadcastShapes(a, b);
  if (!out) failNode(node, broadcastMessage(a, b), ErrorCode::kInvalidArgument);
  return *out;
}

void inferSameAsInput0(InferContext& ctx) {
  const SymShape* s = ctx.inputShape(0);
  if (s) {
    ctx.setOutput(0, ctx.inputType(0), *s);
  } else {
    ctx.setOutputType(0, ctx.inputType(0));
  }
}

namespace {

std::optional<SymShape> broadcastAllInputs(InferContext& ctx) {
  SymShape out;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) continue;
    const SymShape* s = ctx.inputShape(i);
    if (!s) return std::nullopt;
    out = broadcastSymShapes(ctx, out, *s);
  }
  return out;
}

}  // namespace

void inferBroadcast(InferContext& ctx) {
  auto shape = broadcastAllInputs(ctx);
  if (shape) {
    ctx.setOutput(0, ctx.inputType(0), *shape);
  } else {
    ctx.setOutputType(0, ctx.inputType(0));
  }
}

void inferBroadcastBool(InferContext& ctx) {
  auto shape = broadcastAllInputs(ctx);
  if (shape) {
    ctx.setOutput(0, DataType::kBool, *shape);
  } else {
    ctx.setOutputType(0, DataType::kBool);
  }
}

TypeInfo inferThroughOp(const InferContext& ctx, const char* opType, int64_t opset,
                        const std::vector<size_t>& picks, const std::vector<DataType>& dtypes) {
  const OpSchema* schema = OpSchemaRegistry::global().find("", opType, opset);
  if (!schema) ctx.fail(std::string("needs the ") + opType + " shape rule (internal error)");
  std::vector<TypeInfo> types(picks.size());
  std::vector<const TypeInfo*> typePointers;
  std::vector<const Tensor*> values;
  for (size_t k = 0; k < picks.size(); ++k) {
    const size_t i = picks[k];
    if (!ctx.hasInput(i)) {
      typePointers.push_back(nullptr);
      values.push_back(nullptr);
      continue;
    }
    types[k].dtype =
        k < dtypes.size() && dtypes[k] != DataType::kUndefined ? dtypes[k] : ctx.inputType(i);
    if (const SymShape* shape = ctx.inputShape(i)) types[k].shape = *shape;
    typePointers.push_back(&types[k]);
    values.push_back(types[k].dtype == ctx.inputType(i) ? ctx.inputValue(i) : nullptr);
  }
  std::vector<TypeInfo> outputs(1);
  Node atOpset = ctx.node();  // the other op's rule runs at the opset asked for, not this node's
  atOpset.opset = opset;
  InferContext inner(atOpset, typePointers, values, outputs);
  schema->infer(inner);
  return outputs[0];
}

}  // namespace kiln::ir
