// Shape and type rules of the recurrent ops RNN, GRU and LSTM (opset 7+; `layout` from opset 14).
// With layout 0, X is [seq, batch, input], Y [seq, directions, batch, hidden] and Y_h/Y_c
// [directions, batch, hidden]; layout 1 puts batch first: [batch, seq, input], [batch, seq,
// directions, hidden] and [batch, directions, hidden].
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

Dim dimOf(const SymShape* shape, size_t i) {
  return shape && shape->size() > i ? (*shape)[i] : Dim::unknown();
}

void requireRank(const InferContext& ctx, size_t input, size_t rank, const char* name) {
  const SymShape* s = ctx.inputShape(input);
  if (s && s->size() != rank) {
    ctx.fail(std::string("input '") + name + "' must have rank " + std::to_string(rank) + ", got " +
             symShapeToString(*s));
  }
}

/// gates: 1 for RNN, 3 for GRU, 4 for LSTM.
void inferRecurrent(InferContext& ctx, int64_t gates) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  ctx.requireInput(2);
  DataType dtype = ctx.inputType(0);
  if (!isFloatingPoint(dtype))
    ctx.fail("expects a floating-point input, got " + dataTypeName(dtype),
             ErrorCode::kUnsupportedNode);
  for (size_t i : {1, 2}) {
    if (ctx.inputType(i) != dtype) ctx.fail("inputs X, W and R must have the same type");
  }
  const Node& node = ctx.node();
  std::string direction = attrString(node, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    ctx.fail("attribute 'direction' must be forward, reverse or bidirectional, got '" + direction +
             "'");
  }
  int64_t directions = direction == "bidirectional" ? 2 : 1;
  int64_t layout = ctx.opset() >= 14 ? attrInt(node, "layout", 0) : 0;
  if (layout != 0 && layout != 1)
    ctx.fail("attribute 'layout' must be 0 or 1, got " + std::to_string(layout));
  requireRank(ctx, 0, 3, "X");
  requireRank(ctx, 1, 3, "W");
  requireRank(ctx, 2, 3, "R");

  const SymShape* w = ctx.inputShape(1);
  const SymShape* r = ctx.inputShape(2);
  Dim hidden =
      hasAttr(node, "hidden_size") ? Dim::known(attrInt(node, "hidden_size")) : dimOf(r, 2);
  if (hidden.isKnown() && hidden.value <= 0) ctx.fail("attribute 'hidden_size' must be positive");
  int64_t gateRows = 0;
  if (hidden.isKnown() && __builtin_mul_overflow(gates, hidden.value, &gateRows))
    ctx.fail("hidden_size " + std::to_string(hidden.value) + " is too large (" +
             std::to_string(gates) + " gates of it overflow int64)");
  for (const SymShape* weights : {w, r}) {
    Dim dirs = dimOf(weights, 0);
    Dim rows = dimOf(weights, 1);
    if (dirs.isKnown() && dirs.value != directions) {
      ctx.fail("weights have " + std::to_string(dirs.value) + " directions, expected " +
               std::to_string(directions));
    }
    if (rows.isKnown() && hidden.isKnown() && rows.value != gateRows) {
      ctx.fail("weights have " + std::to_string(rows.value) + " rows, expected " +
               std::to_string(gateRows));
    }
  }
  Dim rCols = dimOf(r, 2);
  if (rCols.isKnown() && hidden.isKnown() && rCols.value != hidden.value) {
    ctx.fail("R has " + std::to_string(rCols.value) + " columns, expected hidden_size " +
             std::to_string(hidden.value));
  }
  Dim inputSize = dimOf(ctx.inputShape(0), 2);
  Dim wCols = dimOf(w, 2);
  if (inputSize.isKnown() && wCols.isKnown() && inputSize.value != wCols.value) {
    ctx.fail("W has " + std::to_string(wCols.value) + " columns, expected input size " +
             std::to_string(inputSize.value));
  }

  const SymShape* x = ctx.inputShape(0);
  Dim seq = dimOf(x, layout == 0 ? 0 : 1);
  Dim batch = dimOf(x, layout == 0 ? 1 : 0);
  Dim dirs = Dim::known(directions);
  SymShape y =
      layout == 0 ? SymShape{seq, dirs, batch, hidden} : SymShape{batch, seq, dirs, hidden};
  SymShape state = layout == 0 ? SymShape{dirs, batch, hidden} : SymShape{batch, dirs, hidden};
  ctx.setOutput(0, dtype, y);
  ctx.setOutput(1, dtype, state);
  if (gates == 4) ctx.setOutput(2, dtype, state);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "RNN", 7, 1000, [](InferContext& ctx) { inferRecurrent(ctx, 1); }});
KILN_REGISTER_OP_SCHEMA({"", "GRU", 7, 1000, [](InferContext& ctx) { inferRecurrent(ctx, 3); }});
KILN_REGISTER_OP_SCHEMA({"", "LSTM", 7, 1000, [](InferContext& ctx) { inferRecurrent(ctx, 4); }});

}  // namespace kiln::ir
