// Shape and type rules of com.microsoft DynamicQuantizeLSTM (version 1), the LSTM that ONNX
// Runtime's quantizer (quantize_dynamic) writes: ONNX LSTM's inputs, attributes and outputs
// (layout 0 only), with 8-bit weights stored transposed and their quantization after P:
//   X [seq, batch, input] float32, W [directions, input, 4 * hidden], R [directions, hidden,
//   4 * hidden] (int8 or uint8), B, sequence_lens, initial_h, initial_c, P as LSTM's,
//   W_scale, W_zero_point, R_scale, R_zero_point: one value per direction, or [directions, 4 *
//   hidden].
// -> Y [seq, directions, batch, hidden], Y_h and Y_c [directions, batch, hidden].
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

Dim dimOf(const SymShape* shape, size_t i) {
  return shape && shape->size() > i ? (*shape)[i] : Dim::unknown();
}

void requireDim(const InferContext& ctx, const char* name, const SymShape* shape, size_t i,
                const Dim& expected, const char* what) {
  const Dim got = dimOf(shape, i);
  if (got.isKnown() && expected.isKnown() && got.value != expected.value) {
    ctx.fail(std::string(name) + " " + symShapeToString(*shape) + ": dimension " +
             std::to_string(i) + " must be " + what + " (" + std::to_string(expected.value) + ")");
  }
}

void requireEightBitWeights(const InferContext& ctx, size_t weights, size_t zeroPoint,
                            const char* name) {
  const DataType t = ctx.inputType(weights);
  if (t != DataType::kInt8 && t != DataType::kUint8) {
    ctx.fail(std::string(name) + " must be int8 or uint8, got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.hasInput(zeroPoint) && ctx.inputType(zeroPoint) != t) {
    ctx.fail(std::string(name) + "_zero_point must have " + name + "'s type " + dataTypeName(t));
  }
  const SymShape* s = ctx.inputShape(weights);
  if (s && s->size() != 3)
    ctx.fail(std::string(name) + " must have rank 3, got " + symShapeToString(*s));
}

void inferDynamicQuantizeLstm(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 8, 10}) ctx.requireInput(i);
  if (ctx.inputType(0) != DataType::kFloat32) {
    ctx.fail("X must be float32, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  }
  for (size_t i : {3, 5, 6, 7, 8, 10}) {
    if (ctx.hasInput(i) && ctx.inputType(i) != DataType::kFloat32) {
      ctx.fail("input " + std::to_string(i) + " must be float32, got " +
               dataTypeName(ctx.inputType(i)));
    }
  }
  requireEightBitWeights(ctx, 1, 9, "W");
  requireEightBitWeights(ctx, 2, 11, "R");
  const std::string direction = attrString(ctx.node(), "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    ctx.fail("attribute 'direction' must be forward, reverse or bidirectional, got '" + direction +
             "'");
  }
  const Dim dirs = Dim::known(direction == "bidirectional" ? 2 : 1);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  const SymShape* r = ctx.inputShape(2);
  if (x && x->size() != 3)
    ctx.fail("X must have rank 3 ([seq, batch, input]), got " + symShapeToString(*x));
  const Dim hidden = hasAttr(ctx.node(), "hidden_size")
                         ? Dim::known(attrInt(ctx.node(), "hidden_size"))
                         : dimOf(r, 1);
  if (hidden.isKnown() && hidden.value <= 0) ctx.fail("attribute 'hidden_size' must be positive");
  const Dim gates = productDims(ctx.node(), hidden, 4, "4 * hidden_size");
  requireDim(ctx, "W", w, 0, dirs, "the number of directions");
  requireDim(ctx, "W", w, 1, dimOf(x, 2), "X's input size");
  requireDim(ctx, "W", w, 2, gates, "4 * hidden_size");
  requireDim(ctx, "R", r, 0, dirs, "the number of directions");
  requireDim(ctx, "R", r, 1, hidden, "hidden_size");
  requireDim(ctx, "R", r, 2, gates, "4 * hidden_size");
  const SymShape state{dirs, dimOf(x, 1), hidden};
  ctx.setOutput(0, DataType::kFloat32, SymShape{dimOf(x, 0), dirs, dimOf(x, 1), hidden});
  ctx.setOutput(1, DataType::kFloat32, state);
  ctx.setOutput(2, DataType::kFloat32, state);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "DynamicQuantizeLSTM", 1, 1000,
                         inferDynamicQuantizeLstm});

}  // namespace kiln::ir
