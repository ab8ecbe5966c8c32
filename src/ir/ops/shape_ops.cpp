// Shape and type rules of ops that reinterpret a tensor's shape or create one from a shape:
// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Shape, Size, Expand, ConstantOfShape,
// Range, EyeLike.
#include <algorithm>
#include <cmath>
#include <map>

#include "ir/ops/shape_rules.h"

namespace kiln::ir {

namespace {

// An element count as known factor x product of named dims; `unknown` if an anonymous dim takes
// part.
struct SymCount {
  int64_t factor = 1;
  std::map<std::string, int> symbols;
  bool unknown = false;
  bool overflow = false;  // the known dims' product is past int64

  void multiply(const Dim& d) {
    if (d.isKnown()) {
      overflow = overflow || __builtin_mul_overflow(factor, d.value, &factor);
    } else if (!d.symbol.empty()) {
      ++symbols[d.symbol];
    } else {
      unknown = true;
    }
  }
};

SymCount countOf(const Node& node, const SymShape& shape, size_t begin, size_t end,
                 size_t skip = SIZE_MAX) {
  SymCount c;
  for (size_t i = begin; i < end; ++i)
    if (i != skip) c.multiply(shape[i]);
  if (c.overflow) {
    failNode(node, "shape " + symShapeToString(shape) + " has more elements than int64 holds",
             ErrorCode::kInvalidArgument);
  }
  return c;
}

}  // namespace

Dim productDim(const Node& node, const SymShape& shape, size_t begin, size_t end) {
  SymCount c = countOf(node, shape, begin, end);
  if (c.unknown) return Dim::unknown();
  if (c.symbols.empty()) return Dim::known(c.factor);
  if (c.factor == 1 && c.symbols.size() == 1 && c.symbols.begin()->second == 1) {
    return Dim::named(c.symbols.begin()->first);
  }
  return Dim::unknown();
}

SymShape reshapeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& target,
                         bool allowZero) {
  SymShape out(target.size());
  size_t inferred = SIZE_MAX;
  bool hasZero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t t = target[i];
    if (t == -1) {
      if (inferred != SIZE_MAX) failNode(node, "shape has more than one -1");
      inferred = i;
    } else if (t == 0 && !allowZero) {
      if (i >= in.size()) {
        failNode(node, "shape entry " + std::to_string(i) + " is 0 (copy) but the input has rank " +
                           std::to_string(in.size()));
      }
      out[i] = in[i];
    } else if (t < 0) {
      failNode(node, "shape entry " + std::to_string(t) + " is invalid");
    } else {
      hasZero = hasZero || t == 0;
      out[i] = Dim::known(t);
    }
  }
  if (hasZero && inferred != SIZE_MAX) failNode(node, "shape has both -1 and 0 with allowzero=1");

  SymCount inCount = countOf(node, in, 0, in.size());
  SymCount outCount = countOf(node, out, 0, out.size(), inferred);
  auto describe = [&] {
    std::string s;
    for (size_t i = 0; i < target.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(target[i]);
    }
    return "cannot reshape " + symShapeToString(in) + " to [" + s + "]";
  };
  if (inCount.unknown || outCount.unknown) {
    if (inferred != SIZE_MAX) out[inferred] = Dim::unknown();
    return out;
  }
  // Cancel the symbols both sides share.
  for (auto it = outCount.symbols.begin(); it != outCount.symbols.end();) {
    auto match = inCount.symbols.find(it->first);
    int common = match == inCount.symbols.end() ? 0 : std::min(match->second, it->second);
    if (common) {
      match->second -= common;
      if (match->second == 0) inCount.symbols.erase(match);
    }
    it->second -= common;
    it = it->second == 0 ? outCount.symbols.erase(it) : std::next(it);
  }
  if (inferred == SIZE_MAX) {
    if (inCount.symbols.empty() && outCount.symbols.empty() && inCount.factor != outCount.factor) {
      failNode(node, describe() + ": element counts differ", ErrorCode::kInvalidArgument);
    }
    return out;
  }
  if (!outCount.symbols.empty()) {
    out[inferred] = Dim::unknown();
  } else if (outCount.factor == 0) {
    failNode(node, describe() + ": -1 is ambiguous with a zero-sized dim",
             ErrorCode::kInvalidArgument);
  } else if (inCount.symbols.empty()) {
    if (inCount.factor % outCount.factor != 0) {
      failNode(node, describe() + ": element counts differ", ErrorCode::kInvalidArgument);
    }
    out[inferred] = Dim::known(inCount.factor / outCount.factor);
  } else if (inCount.symbols.size() == 1 && inCount.symbols.begin()->second == 1 &&
             inCount.factor == outCount.factor) {
    out[inferred] = Dim::named(inCount.symbols.begin()->first);
  } else {
    out[inferred] = Dim::unknown();
  }
  return out;
}

SymShape squeezeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& axes) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i].isKnown() && in[i].value == 1;
  }
  for (int64_t a : axes) {
    int64_t axis = normalizeAxis(node, a, rank);
    if (drop[axis]) failNode(node, "axis " + std::to_string(a) + " is repeated");
    if (in[axis].isKnown() && in[axis].value != 1) {
      failNode(node,
               "cannot squeeze axis " + std::to_string(a) + " of size " +
                   std::to_string(in[axis].value) + " (shape " + symShapeToString(in) + ")",
               ErrorCode::kInvalidArgument);
    }
    drop[axis] = true;
  }
  SymShape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

SymShape unsqueezeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& axes) {
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    int64_t axis = normalizeAxis(node, a, rank);
    if (inserted[axis]) failNode(node, "axis " + std::to_string(a) + " is repeated");
    inserted[axis] = true;
  }
  SymShape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(inserted[i] ? Dim::known(1) : in[next++]);
  return out;
}

std::optional<std::vector<int64_t>> axesFromAttrOrInput(const Node& node, const Tensor* axesInput,
                                                        bool hasAxesInput) {
  if (node.opset < 13) return attrInts(node, "axes", {});
  if (!hasAxesInput) return std::vector<int64_t>{};
  if (!axesInput) return std::nullopt;
  return axesInput->toInt64Vector();
}

namespace {

void inferReshape(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const bool allowZero = ctx.opset() >= 14 && attrInt(ctx.node(), "allowzero", 0) != 0;
  if (ctx.inputType(1) != DataType::kInt64)
    ctx.fail("shape must be int64, got " + dataTypeName(ctx.inputType(1)));
  auto target = ctx.inputInts(1);
  const SymShape* in = ctx.inputShape(0);
  if (target && in) {
    ctx.setOutput(0, type, reshapeSymShape(ctx.node(), *in, *target, allowZero));
  } else if (target) {
    SymShape out;
    for (int64_t t : *target)
      out.push_back(t > 0 || (t == 0 && allowZero) ? Dim::known(t) : Dim::unknown());
    ctx.setOutput(0, type, out);
  } else if (auto targetShape = ctx.inputConcreteShape(1);
             targetShape && targetShape->size() == 1) {
    ctx.setOutput(0, type, ctx.unknownDims((*targetShape)[0], 1));
  } else {
    ctx.setOutputType(0, type);
  }
}

void inferFlatten(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutput(0, type, SymShape{Dim::unknown(), Dim::unknown()});
    return;
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  int64_t axis = attrInt(ctx.node(), "axis", 1);
  if (axis < -rank || axis > rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  ctx.setOutput(0, type,
                SymShape{productDim(ctx.node(), *in, 0, axis),
                         productDim(ctx.node(), *in, axis, in->size())});
}

void inferSqueeze(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  auto axes = axesFromAttrOrInput(ctx.node(), ctx.inputValue(1), ctx.hasInput(1));
  // Without axes, which dims are dropped depends on dims that may not be known yet.
  bool unknownDim =
      in && std::any_of(in->begin(), in->end(), [](const Dim& d) { return !d.isKnown(); });
  if (!in || !axes || (axes->empty() && unknownDim)) {
    ctx.setOutputType(0, type);
    return;
  }
  ctx.setOutput(0, type, squeezeSymShape(ctx.node(), *in, *axes));
}

void inferUnsqueeze(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  auto axes = axesFromAttrOrInput(ctx.node(), ctx.inputValue(1), ctx.hasInput(1));
  if (ctx.opset() >= 13 && !ctx.hasInput(1)) ctx.fail("input 'axes' is required");
  if (axes && axes->empty()) ctx.fail("axes are empty");
  if (!in || !axes) {
    ctx.setOutputType(0, type);
    return;
  }
  ctx.setOutput(0, type, unsqueezeSymShape(ctx.node(), *in, *axes));
}

void inferDropout(InferContext& ctx) {
  inferSameAsInput0(ctx);
  if (ctx.numOutputs() < 2) return;
  // The mask is bool from opset 10, the data type before.
  const DataType maskType = ctx.opset() >= 10 ? DataType::kBool : ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (in) {
    ctx.setOutput(1, maskType, *in);
  } else {
    ctx.setOutputType(1, maskType);
  }
}

void inferShape(InferContext& ctx) {
  ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutput(0, DataType::kInt64, SymShape{Dim::unknown()});
    return;
  }
  const int64_t rank = static_cast<int64_t>(in->size());
  auto clampIndex = [rank](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  int64_t start = ctx.opset() >= 15 ? clampIndex(attrInt(ctx.node(), "start", 0)) : 0;
  int64_t end = ctx.opset() >= 15 ? clampIndex(attrInt(ctx.node(), "end", rank)) : rank;
  ctx.setOutput(0, DataType::kInt64, Shape{std::max<int64_t>(0, end - start)});
}

void inferSize(InferContext& ctx) {
  ctx.inputType(0);
  ctx.setOutput(0, DataType::kInt64, Shape{});
}

void inferExpand(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  auto target = ctx.inputInts(1);
  if (in && target) {
    for (int64_t d : *target)
      if (d < 0) ctx.fail("shape entry " + std::to_string(d) + " is negative");
    ctx.setOutput(0, type, broadcastSymShapes(ctx, *in, symShapeOf(*target)));
  } else if (auto targetShape = ctx.inputConcreteShape(1);
             in && targetShape && targetShape->size() == 1) {
    const SymShape target = ctx.unknownDims((*targetShape)[0], 1);
    ctx.setOutput(0, type, SymShape(std::max(in->size(), target.size()), Dim::unknown()));
  } else {
    ctx.setOutputType(0, type);
  }
}

void inferConstantOfShape(InferContext& ctx) {
  DataType type = DataType::kFloat32;
  if (hasAttr(ctx.node(), "value")) {
    const Tensor& value = attrTensor(ctx.node(), "value");
    if (value.numel() != 1)
      ctx.fail("attribute 'value' must hold one element, got " + value.describe());
    type = value.dtype();
  }
  if (auto dims = ctx.inputInts(0)) {
    for (int64_t d : *dims)
      if (d < 0)
        ctx.fail("shape entry " + std::to_string(d) + " is negative", ErrorCode::kInvalidArgument);
    ctx.setOutput(0, type, *dims);
  } else if (auto shapeShape = ctx.inputConcreteShape(0); shapeShape && shapeShape->size() == 1) {
    ctx.setOutput(0, type, ctx.unknownDims((*shapeShape)[0], 0));
  } else {
    ctx.setOutputType(0, type);
  }
}

void inferRange(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.inputType(i) != type) ctx.fail("start, limit and delta must have the same type");
  }
  const Tensor* start = ctx.inputValue(0);
  const Tensor* limit = ctx.inputValue(1);
  const Tensor* delta = ctx.inputValue(2);
  if (!start || !limit || !delta) {
    ctx.setOutput(0, type, SymShape{Dim::unknown()});
    return;
  }
  for (const Tensor* t : {start, limit, delta})
    if (t->numel() != 1) ctx.fail("start, limit and delta must be scalars, got " + t->describe());
  double d = delta->doubleAt(0);
  if (d == 0) ctx.fail("delta is 0", ErrorCode::kInvalidArgument);
  double count = std::ceil((limit->doubleAt(0) - start->doubleAt(0)) / d);
  if (!(count < 9e18)) ctx.fail("the range is too long", ErrorCode::kInvalidArgument);
  // Clamped before the conversion: a count below int64's range (-7e44) has no int64 value.
  ctx.setOutput(0, type, Shape{count > 0 ? static_cast<int64_t>(count) : int64_t{0}});
}

void inferEyeLike(InferContext& ctx) {
  DataType type = ctx.inputType(0);
  if (hasAttr(ctx.node(), "dtype")) type = static_cast<DataType>(attrInt(ctx.node(), "dtype"));
  if (!isSupportedDataType(type) || type == DataType::kString) {
    ctx.fail("unsupported output type " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  }
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 2) ctx.fail("expects a 2-D input, got " + symShapeToString(*in));
  if (in) {
    ctx.setOutput(0, type, *in);
  } else {
    ctx.setOutput(0, type, SymShape{Dim::unknown(), Dim::unknown()});
  }
}

// Identity passes sequences through too (opset 14+ types); its kernel shares the value.
void inferIdentity(InferContext& ctx) {
  if (ctx.inputIsSequence(0))
    ctx.setSequenceOutput(0, ctx.inputType(0));
  else
    inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Reshape", 5, 1000, inferReshape});
KILN_REGISTER_OP_SCHEMA({"", "Flatten", 1, 1000, inferFlatten});
KILN_REGISTER_OP_SCHEMA({"", "Squeeze", 1, 1000, inferSqueeze});
KILN_REGISTER_OP_SCHEMA({"", "Unsqueeze", 1, 1000, inferUnsqueeze});
KILN_REGISTER_OP_SCHEMA({"", "Identity", 1, 1000, inferIdentity});
KILN_REGISTER_OP_SCHEMA({"", "Dropout", 7, 1000, inferDropout});
KILN_REGISTER_OP_SCHEMA({"", "Shape", 1, 1000, inferShape});
KILN_REGISTER_OP_SCHEMA({"", "Size", 1, 1000, inferSize});
KILN_REGISTER_OP_SCHEMA({"", "Expand", 8, 1000, inferExpand});
KILN_REGISTER_OP_SCHEMA({"", "ConstantOfShape", 9, 1000, inferConstantOfShape});
KILN_REGISTER_OP_SCHEMA({"", "Range", 11, 1000, inferRange});
KILN_REGISTER_OP_SCHEMA({"", "EyeLike", 9, 1000, inferEyeLike});

}  // namespace kiln::ir
