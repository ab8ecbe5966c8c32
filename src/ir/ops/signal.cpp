// Shape rules of the signal ops (opset 17+): DFT (17: axis attribute; 20: axis as input 2), STFT,
// HannWindow/HammingWindow/BlackmanWindow and MelWeightMatrix. Complex tensors are real tensors
// with a trailing dim of 2 (real, imaginary); a trailing 1 is a real signal.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

/// A scalar (or one-element) integer input when its value is known.
std::optional<int64_t> scalarInt(InferContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return std::nullopt;
  auto v = ctx.inputInts(i);
  if (!v) return std::nullopt;
  if (v->size() != 1)
    ctx.fail("input " + std::to_string(i) + " must hold one value, got " +
             std::to_string(v->size()));
  return v->front();
}

void requireFloat(InferContext& ctx, size_t i, const char* what) {
  if (!isFloatingPoint(ctx.inputType(i))) {
    ctx.fail(std::string(what) + " must be a float tensor, got " + dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

void inferDft(InferContext& ctx) {
  requireFloat(ctx, 0, "input");
  const DataType dtype = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, dtype);
    return;
  }
  const auto rank = static_cast<int64_t>(in->size());
  if (rank < 2) ctx.fail("input must have rank >= 2 ([..., 1 or 2]), got " + symShapeToString(*in));
  if (in->back().isKnown() && in->back().value != 1 && in->back().value != 2) {
    ctx.fail("input's last dim must be 1 (real) or 2 (complex), got " + symShapeToString(*in));
  }
  const bool inverse = attrInt(ctx.node(), "inverse", 0) != 0;
  const bool onesided = attrInt(ctx.node(), "onesided", 0) != 0;
  std::optional<int64_t> axis;
  if (ctx.opset() < 20)
    axis = attrInt(ctx.node(), "axis", 1);
  else
    axis = ctx.hasInput(2) ? scalarInt(ctx, 2) : std::optional<int64_t>(-2);
  SymShape out = *in;
  out.back() =
      Dim::known(inverse && onesided ? 1 : 2);  // an inverse one-sided DFT gives a real signal
  if (!axis) {
    for (int64_t i = 0; i + 1 < rank; ++i) out[i] = Dim::unknown();  // any of them may be the axis
    ctx.setOutput(0, dtype, out);
    return;
  }
  const int64_t a = normalizeAxis(ctx, *axis, rank);
  if (a == rank - 1) ctx.fail("axis must not be the last (real/imaginary) dim");
  // dft_length defaults to the axis size (2 * (size - 1) for an inverse one-sided DFT, whose input
  // holds half a spectrum).
  const Dim& n = (*in)[a];
  std::optional<int64_t> length;
  if (ctx.hasInput(1))
    length = scalarInt(ctx, 1);
  else if (n.isKnown())
    length = (inverse && onesided) ? 2 * (n.value - 1) : n.value;
  if (length && *length < 1)
    ctx.fail("dft_length must be positive, got " + std::to_string(*length));
  if (!length)
    out[a] = Dim::unknown();
  else
    out[a] = Dim::known((!inverse && onesided) ? *length / 2 + 1 : *length);
  ctx.setOutput(0, dtype, out);
}

void inferStft(InferContext& ctx) {
  requireFloat(ctx, 0, "signal");
  const DataType dtype = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (in && (in->size() != 3 ||
             (in->back().isKnown() && in->back().value != 1 && in->back().value != 2))) {
    ctx.fail("signal must be [batch, length, 1 or 2], got " + symShapeToString(*in));
  }
  const std::optional<int64_t> step = scalarInt(ctx, 1);
  if (step && *step < 1) ctx.fail("frame_step must be positive, got " + std::to_string(*step));
  std::optional<int64_t> frameLength = scalarInt(ctx, 3);
  if (!frameLength && ctx.hasInput(2)) {
    if (const SymShape* w = ctx.inputShape(2); w && w->size() == 1 && (*w)[0].isKnown())
      frameLength = (*w)[0].value;
  }
  const bool onesided = attrInt(ctx.node(), "onesided", 1) != 0;
  Dim batch = in ? (*in)[0] : Dim::unknown();
  Dim frames = Dim::unknown(), bins = Dim::unknown();
  if (frameLength) {
    if (*frameLength < 1)
      ctx.fail("frame_length must be positive, got " + std::to_string(*frameLength));
    bins = Dim::known(onesided ? *frameLength / 2 + 1 : *frameLength);
    if (in && (*in)[1].isKnown() && step) {
      if ((*in)[1].value < *frameLength)
        ctx.fail("frame_length " + std::to_string(*frameLength) + " exceeds the signal length " +
                 (*in)[1].toString());
      frames = Dim::known(((*in)[1].value - *frameLength) / *step + 1);
    }
  }
  ctx.setOutput(0, dtype, SymShape{batch, frames, bins, Dim::known(2)});
}

DataType outputDatatype(InferContext& ctx) {
  const auto type = static_cast<DataType>(attrInt(ctx.node(), "output_datatype", 1));
  if (!isSupportedDataType(type) || type == DataType::kString || type == DataType::kBool) {
    ctx.fail("output_datatype " + std::to_string(static_cast<int>(type)) +
             " is not a numeric type");
  }
  return type;
}

void inferWindow(InferContext& ctx) {
  const DataType type = outputDatatype(ctx);
  const std::optional<int64_t> size = scalarInt(ctx, 0);
  if (size && *size < 0) ctx.fail("size must not be negative, got " + std::to_string(*size));
  ctx.setOutput(0, type, SymShape{size ? Dim::known(*size) : Dim::unknown()});
}

void inferMelWeightMatrix(InferContext& ctx) {
  const DataType type = outputDatatype(ctx);
  const std::optional<int64_t> bins = scalarInt(ctx, 0);
  const std::optional<int64_t> dftLength = scalarInt(ctx, 1);
  ctx.setOutput(0, type,
                SymShape{dftLength ? Dim::known(*dftLength / 2 + 1) : Dim::unknown(),
                         bins ? Dim::known(*bins) : Dim::unknown()});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "DFT", 17, 1000, inferDft});
KILN_REGISTER_OP_SCHEMA({"", "STFT", 17, 1000, inferStft});
KILN_REGISTER_OP_SCHEMA({"", "HannWindow", 17, 1000, inferWindow});
KILN_REGISTER_OP_SCHEMA({"", "HammingWindow", 17, 1000, inferWindow});
KILN_REGISTER_OP_SCHEMA({"", "BlackmanWindow", 17, 1000, inferWindow});
KILN_REGISTER_OP_SCHEMA({"", "MelWeightMatrix", 17, 1000, inferMelWeightMatrix});

}  // namespace kiln::ir
