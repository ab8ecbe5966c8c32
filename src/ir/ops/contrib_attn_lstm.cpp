// Shape and type rule of com.microsoft AttnLSTM (version 1): a one-layer LSTM (ONNX LSTM's
// inputs 0-7 and attributes, no layout) whose cell output feeds a Bahdanau attention over a
// memory, the attention (optionally through an attention layer) being concatenated to the next
// step's input. Inputs 8-13: QW [D, hidden, A], MW [D, depth, A], V [D, A], M [batch, steps,
// depth], memory_seq_lens [batch] int32, AW [D, hidden + depth, A'] (optional); W is
// [D, 4 * hidden, input + (A' or depth)]. Outputs Y [seq, D, batch, hidden], Y_h, Y_c
// [D, batch, hidden]; float32.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferAttnLstm(InferContext& ctx) {
  if (ctx.inputType(0) != DataType::kFloat32)
    ctx.fail("X must be float32, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  for (size_t i : {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 13})
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32)
      ctx.fail("input " + std::to_string(i) + " must be float32, got " +
               dataTypeName(ctx.inputType(i)));
  for (size_t i : {4, 12})
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kInt32)
      ctx.fail("input " + std::to_string(i) + " must be int32, got " +
               dataTypeName(ctx.inputType(i)));
  for (size_t i : {8, 9, 10, 11})
    if (!ctx.hasInput(i))
      ctx.fail("input " + std::to_string(i) + " (QW, MW, V, M of the attention) is required");
  if (attrInt(ctx.node(), "layout", 0) != 0) ctx.fail("AttnLSTM has no layout attribute but 0");
  const std::string direction = attrString(ctx.node(), "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ctx.fail("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  const Dim dirs = Dim::known(direction == "bidirectional" ? 2 : 1);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* r = ctx.inputShape(2);
  if (x && x->size() != 3) ctx.fail("X must be [seq, batch, input], got " + symShapeToString(*x));
  Dim hidden = Dim::unknown();
  if (hasAttr(ctx.node(), "hidden_size")) {
    hidden = Dim::known(attrInt(ctx.node(), "hidden_size"));
  } else if (r && r->size() == 3) {
    hidden = (*r)[2];
  }
  const Dim seq = x ? (*x)[0] : Dim::unknown(), batch = x ? (*x)[1] : Dim::unknown();
  if (ctx.numOutputs() > 0)
    ctx.setOutput(0, DataType::kFloat32, SymShape{seq, dirs, batch, hidden});
  for (size_t i = 1; i < ctx.numOutputs() && i < 3; ++i)
    ctx.setOutput(i, DataType::kFloat32, SymShape{dirs, batch, hidden});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "AttnLSTM", 1, 1000, inferAttnLstm});

}  // namespace kiln::ir
