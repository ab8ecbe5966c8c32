// Shape and type rules of ops that rearrange or combine tensors: Transpose, Concat, Split, Tile,
// Pad, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence.
#include <algorithm>

#include "ir/ops/shape_rules.h"

namespace kiln::ir {

std::vector<int64_t> transposePerm(const Node& node, size_t rank) {
  if (!hasAttr(node, "perm")) {
    std::vector<int64_t> perm(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    return perm;
  }
  std::vector<int64_t> perm = attrInts(node, "perm");
  if (perm.size() != rank) {
    failNode(node, "perm has " + std::to_string(perm.size()) + " entries for an input of rank " +
                       std::to_string(rank));
  }
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = normalizeAxis(node, p, static_cast<int64_t>(rank));
    if (seen[p]) failNode(node, "perm repeats axis " + std::to_string(p));
    seen[p] = true;
  }
  return perm;
}

std::optional<std::vector<int64_t>> splitSizes(const Node& node, int64_t dim, size_t numOutputs,
                                               const std::optional<std::vector<int64_t>>& split) {
  const int64_t n = static_cast<int64_t>(numOutputs);
  if (n == 0) failNode(node, "Split has no outputs");
  if (split) {
    if (split->size() != numOutputs) {
      failNode(node, "split has " + std::to_string(split->size()) + " sizes for " +
                         std::to_string(n) + " outputs");
    }
    int64_t total = 0;
    for (int64_t s : *split) {
      if (s < 0) failNode(node, "split size " + std::to_string(s) + " is negative");
      if (__builtin_add_overflow(total, s, &total))
        failNode(node, "split sizes add up to more than int64 holds", ErrorCode::kInvalidArgument);
    }
    if (dim >= 0 && total != dim) {
      failNode(
          node,
          "split sizes add up to " + std::to_string(total) + ", the dim is " + std::to_string(dim),
          ErrorCode::kInvalidArgument);
    }
    return split;
  }
  if (dim < 0) return std::nullopt;
  if (node.opset >= 18 && hasAttr(node, "num_outputs")) {
    int64_t parts = attrInt(node, "num_outputs");
    if (parts != n)
      failNode(node, "num_outputs is " + std::to_string(parts) + " but the node has " +
                         std::to_string(n) + " outputs");
    // Chunks of ceil(dim / n); the last one takes what is left.
    int64_t chunk = ceilDiv(dim, n);
    std::vector<int64_t> sizes(numOutputs, chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0)
      failNode(
          node,
          "cannot split a dim of " + std::to_string(dim) + " into " + std::to_string(n) + " parts",
          ErrorCode::kInvalidArgument);
    return sizes;
  }
  if (dim % n != 0) {
    failNode(node,
             "cannot split a dim of " + std::to_string(dim) + " into " + std::to_string(n) +
                 " equal parts",
             ErrorCode::kInvalidArgument);
  }
  return std::vector<int64_t>(numOutputs, dim / n);
}

std::vector<int64_t> padAmounts(const Node& node, size_t rank, const std::vector<int64_t>& pads,
                                const std::optional<std::vector<int64_t>>& axes) {
  std::vector<int64_t> axisList;
  if (axes) {
    for (int64_t a : *axes) axisList.push_back(normalizeAxis(node, a, static_cast<int64_t>(rank)));
  } else {
    for (size_t i = 0; i < rank; ++i) axisList.push_back(static_cast<int64_t>(i));
  }
  if (pads.size() != 2 * axisList.size()) {
    failNode(node, "pads has " + std::to_string(pads.size()) + " values, expected " +
                       std::to_string(2 * axisList.size()));
  }
  std::vector<int64_t> amounts(2 * rank, 0);
  for (size_t i = 0; i < axisList.size(); ++i) {
    amounts[axisList[i]] = pads[i];
    amounts[rank + axisList[i]] = pads[axisList.size() + i];
  }
  return amounts;
}

namespace {

void inferTranspose(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, type);
    return;
  }
  SymShape out;
  for (int64_t p : transposePerm(ctx.node(), in->size())) out.push_back((*in)[p]);
  ctx.setOutput(0, type, out);
}

int64_t concatAxis(const Node& node) {
  return node.opset < 4 ? attrInt(node, "axis", 1) : attrInt(node, "axis");
}

void inferConcat(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* first = nullptr;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.inputType(i) != type) ctx.fail("inputs have different types");
    if (!first) first = ctx.inputShape(i);
  }
  if (!first) {
    ctx.setOutputType(0, type);
    return;
  }
  const int64_t rank = static_cast<int64_t>(first->size());
  const int64_t axis = normalizeAxis(ctx, concatAxis(ctx.node()), rank);
  SymShape out = *first;
  int64_t total = 0;
  bool totalKnown = true;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const SymShape* s = ctx.inputShape(i);
    if (!s) {
      totalKnown = false;
      continue;
    }
    if (static_cast<int64_t>(s->size()) != rank) {
      ctx.fail("inputs have different ranks: " + symShapeToString(*first) + " and " +
               symShapeToString(*s));
    }
    for (int64_t d = 0; d < rank; ++d) {
      const Dim& dim = (*s)[d];
      if (d == axis) {
        totalKnown = totalKnown && dim.isKnown();
        if (__builtin_add_overflow(total, dim.isKnown() ? dim.value : 0, &total)) {
          ctx.fail("inputs along axis " + std::to_string(axis) + " add up past int64",
                   ErrorCode::kInvalidArgument);
        }
      } else if (dim.isKnown()) {
        if (out[d].isKnown() && out[d].value != dim.value) {
          ctx.fail("input shapes " + symShapeToString(*first) + " and " + symShapeToString(*s) +
                       " differ outside axis " + std::to_string(axis),
                   ErrorCode::kInvalidArgument);
        }
        out[d] = dim;
      }
    }
  }
  if (ctx.numInputs() > 1) out[axis] = totalKnown ? Dim::known(total) : Dim::unknown();
  ctx.setOutput(0, type, out);
}

std::optional<std::vector<int64_t>> splitOperand(const InferContext& ctx, bool& unknown) {
  unknown = false;
  if (ctx.opset() < 13) {
    if (!hasAttr(ctx.node(), "split")) return std::nullopt;
    return attrInts(ctx.node(), "split");
  }
  if (!ctx.hasInput(1)) return std::nullopt;
  auto v = ctx.inputInts(1);
  unknown = !v;
  return v;
}

void inferSplit(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  bool splitUnknown = false;
  auto split = splitOperand(ctx, splitUnknown);
  if (!in) {
    for (size_t i = 0; i < ctx.numOutputs(); ++i) ctx.setOutputType(i, type);
    return;
  }
  if (in->empty())
    ctx.fail("Split needs an input of rank >= 1; input 0 is a scalar", ErrorCode::kInvalidModel);
  const int64_t axis =
      normalizeAxis(ctx, attrInt(ctx.node(), "axis", 0), static_cast<int64_t>(in->size()));
  const Dim& dim = (*in)[axis];
  auto sizes = splitUnknown ? std::nullopt
                            : splitSizes(ctx.node(), dim.isKnown() ? dim.value : -1,
                                         ctx.numOutputs(), split);
  for (size_t i = 0; i < ctx.numOutputs(); ++i) {
    SymShape out = *in;
    out[axis] = sizes ? Dim::known((*sizes)[i]) : Dim::unknown();
    ctx.setOutput(i, type, out);
  }
}

void inferTile(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  auto repeats = ctx.inputInts(1);
  if (!in) {
    ctx.setOutputType(0, type);
    return;
  }
  SymShape out(in->size(), Dim::unknown());
  if (repeats) {
    if (repeats->size() != in->size()) {
      ctx.fail("repeats has " + std::to_string(repeats->size()) + " values for an input of rank " +
               std::to_string(in->size()));
    }
    for (size_t i = 0; i < in->size(); ++i) {
      int64_t r = (*repeats)[i];
      if (r < 0)
        ctx.fail("repeat " + std::to_string(r) + " is negative", ErrorCode::kInvalidArgument);
      const Dim& d = (*in)[i];
      const std::string what = "output dim " + std::to_string(i);
      out[i] = r == 1 ? d
                      : (d.isKnown() ? Dim::known(multiplyDims(ctx.node(), d.value, r, what))
                                     : (r == 0 ? Dim::known(0) : Dim::unknown()));
    }
  }
  ctx.setOutput(0, type, out);
}

void inferPad(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, type);
    return;
  }
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> axes;
  bool axesUnknown = false;
  if (ctx.opset() < 11) {
    pads = attrInts(ctx.node(), "pads");
  } else {
    pads = ctx.inputInts(1);
    if (ctx.hasInput(3)) {
      axes = ctx.inputInts(3);
      axesUnknown = !axes;
    }
  }
  if (!pads || axesUnknown) {
    ctx.setOutput(0, type, SymShape(in->size(), Dim::unknown()));
    return;
  }
  std::vector<int64_t> amounts = padAmounts(ctx.node(), in->size(), *pads, axes);
  SymShape out = *in;
  for (size_t i = 0; i < in->size(); ++i) {
    const int64_t begin = amounts[i], end = amounts[in->size() + i];
    int64_t added = 0;
    if (__builtin_add_overflow(begin, end, &added)) {
      ctx.fail("pads " + std::to_string(begin) + " and " + std::to_string(end) + " of axis " +
                   std::to_string(i) + " add up past int64",
               ErrorCode::kInvalidArgument);
    }
    if (added == 0) continue;
    if (!out[i].isKnown()) {
      out[i] = Dim::unknown();
      continue;
    }
    int64_t size = 0;
    if (__builtin_add_overflow(out[i].value, added, &size)) {
      ctx.fail("pads " + std::to_string(begin) + " and " + std::to_string(end) + " make axis " +
                   std::to_string(i) + " longer than int64 holds",
               ErrorCode::kInvalidArgument);
    }
    if (size < 0) {
      ctx.fail("pads remove more than the " + std::to_string(out[i].value) + " elements of axis " +
                   std::to_string(i),
               ErrorCode::kInvalidArgument);
    }
    out[i] = Dim::known(size);
  }
  ctx.setOutput(0, type, out);
}

// DepthToSpace (toSpace) and SpaceToDepth on NCHW.
void inferBlockRearrange(InferContext& ctx, bool toSpace) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  const int64_t b = attrInt(ctx.node(), "blocksize");
  if (b <= 0) ctx.fail("blocksize must be positive");
  if (!in) {
    ctx.setOutput(0, type, SymShape(4, Dim::unknown()));
    return;
  }
  if (in->size() != 4) ctx.fail("expects a 4-D input, got " + symShapeToString(*in));
  {
    std::string mode = attrString(ctx.node(), "mode", "DCR");
    if (mode != "DCR" && mode != "CRD") ctx.fail("unknown mode '" + mode + "'");
  }
  SymShape out = *in;
  auto scale = [&](size_t i, bool multiply) {
    const Dim& d = (*in)[i];
    if (!d.isKnown()) {
      out[i] = Dim::unknown();
    } else if (multiply) {
      out[i] = Dim::known(multiplyDims(ctx.node(), d.value, b, "output dim " + std::to_string(i)));
    } else {
      if (d.value % b != 0) {
        ctx.fail("dim " + std::to_string(d.value) + " of " + symShapeToString(*in) +
                     " is not divisible by " + std::to_string(b),
                 ErrorCode::kInvalidArgument);
      }
      out[i] = Dim::known(d.value / b);
    }
  };
  const Dim c = (*in)[1];
  if (toSpace) {
    const int64_t b2 = multiplyDims(ctx.node(), b, b, "blocksize^2");
    if (c.isKnown() && c.value % b2 != 0) {
      ctx.fail("channels " + std::to_string(c.value) + " are not divisible by blocksize^2",
               ErrorCode::kInvalidArgument);
    }
    out[1] = c.isKnown() ? Dim::known(c.value / b2) : Dim::unknown();
  } else {
    const std::string what = "output channels";
    out[1] = c.isKnown() ? Dim::known(multiplyDims(
                               ctx.node(), multiplyDims(ctx.node(), c.value, b, what), b, what))
                         : Dim::unknown();
  }
  scale(2, toSpace);
  scale(3, toSpace);
  ctx.setOutput(0, type, out);
}

void inferTrilu(InferContext& ctx) {
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() < 2)
    ctx.fail("expects an input of rank 2 or more, got " + symShapeToString(*in));
  inferSameAsInput0(ctx);
}

void inferReverseSequence(InferContext& ctx) {
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() < 2)
    ctx.fail("expects an input of rank 2 or more, got " + symShapeToString(*in));
  const int64_t batchAxis = attrInt(ctx.node(), "batch_axis", 1);
  const int64_t timeAxis = attrInt(ctx.node(), "time_axis", 0);
  if (!((batchAxis == 0 && timeAxis == 1) || (batchAxis == 1 && timeAxis == 0))) {
    ctx.fail("batch_axis and time_axis must be 0 and 1");
  }
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Transpose", 1, 1000, inferTranspose});
KILN_REGISTER_OP_SCHEMA({"", "Concat", 1, 1000, inferConcat});
KILN_REGISTER_OP_SCHEMA({"", "Split", 2, 1000, inferSplit});
KILN_REGISTER_OP_SCHEMA({"", "Tile", 6, 1000, inferTile});
KILN_REGISTER_OP_SCHEMA({"", "Pad", 2, 1000, inferPad});
KILN_REGISTER_OP_SCHEMA({"", "DepthToSpace", 1, 1000,
                         [](InferContext& ctx) { inferBlockRearrange(ctx, true); }});
KILN_REGISTER_OP_SCHEMA({"", "SpaceToDepth", 1, 1000,
                         [](InferContext& ctx) { inferBlockRearrange(ctx, false); }});
KILN_REGISTER_OP_SCHEMA({"", "Trilu", 14, 1000, inferTrilu});
KILN_REGISTER_OP_SCHEMA({"", "ReverseSequence", 10, 1000, inferReverseSequence});

}  // namespace kiln::ir
