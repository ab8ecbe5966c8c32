// Shape rules and spatial geometry of Conv, ConvTranspose and ConvInteger.
#include "ir/ops/conv_geometry.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::vector<int64_t> positiveInts(const Node& node, const char* name, size_t n) {
  std::vector<int64_t> v = attrInts(node, name, std::vector<int64_t>(n, 1));
  if (v.size() != n)
    failNode(node, std::string("attribute '") + name + "' needs " + std::to_string(n) + " values");
  for (int64_t x : v) {
    if (x <= 0) failNode(node, std::string("attribute '") + name + "' must be positive");
  }
  return v;
}

// Attributes common to Conv and ConvTranspose; pads are those of the attribute (auto_pad not
// applied).
ConvGeometry commonGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                            const std::vector<int64_t>& weightSpatial) {
  const size_t n = inputSpatial.size();
  ConvGeometry g;
  g.kernel = attrInts(node, "kernel_shape", weightSpatial);
  if (g.kernel.size() != n) failNode(node, "kernel_shape needs " + std::to_string(n) + " values");
  for (size_t i = 0; i < n; ++i) {
    if (weightSpatial.size() == n && weightSpatial[i] >= 0 && g.kernel[i] != weightSpatial[i]) {
      failNode(node, "kernel_shape does not match the weight's spatial shape");
    }
    if (g.kernel[i] == 0) failNode(node, "kernel dims must be positive");
  }
  g.strides = positiveInts(node, "strides", n);
  g.dilations = positiveInts(node, "dilations", n);
  std::vector<int64_t> pads = attrInts(node, "pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n)
    failNode(node, "attribute 'pads' needs " + std::to_string(2 * n) + " values");
  for (int64_t p : pads) {
    if (p < 0) failNode(node, "attribute 'pads' must not be negative");
  }
  g.padsBegin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  g.padsEnd.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
  g.outputPadding.assign(n, 0);
  g.output.assign(n, -1);
  return g;
}

std::string autoPadOf(const Node& node) {
  std::string autoPad = attrString(node, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER" &&
      autoPad != "VALID") {
    failNode(node, "unknown auto_pad '" + autoPad + "'");
  }
  return autoPad;
}

std::vector<int64_t> spatialOf(const SymShape* shape) {
  std::vector<int64_t> dims;
  if (!shape) return dims;
  for (size_t i = 2; i < shape->size(); ++i) dims.push_back((*shape)[i].value);
  return dims;
}

// Conv and ConvTranspose: X, W and B share one floating-point type, which is the output's.
DataType requireFloatInputs(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  const DataType t = ctx.inputType(0);
  if (!isFloatingPoint(t))
    ctx.fail("expects floating-point inputs, got " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != t || (ctx.hasInput(2) && ctx.inputType(2) != t))
    ctx.fail("input types differ");
  return t;
}

// ConvInteger: 8-bit X and W with zero points of their types (inputs 2 and 3, no bias); int32
// output.
DataType requireConvIntegerInputs(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  for (size_t i = 0; i < 2; ++i) {
    const DataType t = ctx.inputType(i);
    if (t != DataType::kUint8 && t != DataType::kInt8)
      ctx.fail("expects int8 or uint8 inputs, got " + dataTypeName(t), ErrorCode::kUnsupportedNode);
    if (ctx.hasInput(i + 2) && ctx.inputType(i + 2) != t)
      ctx.fail("zero point type differs from its input's");
  }
  return DataType::kInt32;
}

enum class ConvKind { kConv, kConvTranspose, kConvInteger };

// Shared by the conv ops: checks ranks and group, then sets [batch, channels, spatial...].
void inferConvLike(InferContext& ctx, ConvKind kind) {
  const bool transpose = kind == ConvKind::kConvTranspose;
  const DataType t =
      kind == ConvKind::kConvInteger ? requireConvIntegerInputs(ctx) : requireFloatInputs(ctx);
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  const int64_t group = attrInt(ctx.node(), "group", 1);
  if (group <= 0) ctx.fail("group must be positive");
  if (!x) {
    ctx.setOutputType(0, t);
    return;
  }
  if (x->size() < 3) ctx.fail("input must have rank >= 3, got " + symShapeToString(*x));
  if (w && w->size() != x->size()) ctx.fail("weight rank differs from input rank");
  const Dim channels = (*x)[1];
  Dim outChannels = Dim::unknown();
  if (w) {
    const Dim& w0 = (*w)[0];
    const Dim& w1 = (*w)[1];
    if (!transpose) {
      if (channels.isKnown() && w1.isKnown()) {
        const int64_t expected =
            multiplyDims(ctx.node(), w1.value, group, "the weight's input channels x group");
        if (channels.value != expected) {
          ctx.fail("input has " + channels.toString() + " channels but weight expects " +
                   std::to_string(expected));
        }
      }
      if (w0.isKnown() && w0.value % group != 0) ctx.fail("output channels not divisible by group");
      outChannels = w0;
    } else {
      if (channels.isKnown() && w0.isKnown() && channels.value != w0.value) {
        ctx.fail("input has " + channels.toString() + " channels but weight has " + w0.toString());
      }
      outChannels =
          productDims(ctx.node(), w1, group, "the output channels (weight dim 1 x group)");
    }
  }
  if (channels.isKnown() && channels.value % group != 0)
    ctx.fail("input channels not divisible by group");
  if (kind != ConvKind::kConvInteger && ctx.hasInput(2)) {
    const SymShape* b = ctx.inputShape(2);
    if (b && (b->size() != 1 ||
              (outChannels.isKnown() && (*b)[0].isKnown() && (*b)[0].value != outChannels.value))) {
      ctx.fail("bias must be 1-D with one value per output channel");
    }
  }
  std::vector<int64_t> weightSpatial = w ? spatialOf(w) : std::vector<int64_t>(x->size() - 2, -1);
  ConvGeometry g = transpose ? convTransposeGeometry(ctx.node(), spatialOf(x), weightSpatial)
                             : convGeometry(ctx.node(), spatialOf(x), weightSpatial);
  SymShape out = {(*x)[0], outChannels};
  for (int64_t d : g.output) out.push_back(d >= 0 ? Dim::known(d) : Dim::unknown());
  ctx.setOutput(0, t, out);
}

}  // namespace

namespace {

// Geometry sums and products in 128 bits: a bad model's kernel, strides, dilations and pads may
// each be near INT64_MAX, and must be refused by name instead of wrapping.
using Wide = __int128;

int64_t narrowGeometry(const Node& node, Wide v, const char* what, size_t axis) {
  if (v <= INT64_MIN || v > INT64_MAX) {  // INT64_MIN too: floorDiv negates it
    failNode(
        node,
        std::string(what) + " of spatial axis " + std::to_string(axis) +
            " is past int64 (kernel_shape, strides, dilations, pads or output_shape too large)",
        ErrorCode::kInvalidArgument);
  }
  return static_cast<int64_t>(v);
}

}  // namespace

ConvGeometry convGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                          const std::vector<int64_t>& weightSpatial) {
  ConvGeometry g = commonGeometry(node, inputSpatial, weightSpatial);
  const std::string autoPad = autoPadOf(node);
  for (size_t i = 0; i < inputSpatial.size(); ++i) {
    const int64_t in = inputSpatial[i];
    const int64_t s = g.strides[i];
    if (in < 0 || g.kernel[i] < 0) continue;
    const Wide extent = Wide{g.dilations[i]} * (g.kernel[i] - 1) + 1;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      g.output[i] = narrowGeometry(node, (Wide{in} + s - 1) / s, "the output size", i);
      const int64_t total = narrowGeometry(
          node, std::max<Wide>(0, Wide{g.output[i] - 1} * s + extent - in), "the padding", i);
      const int64_t smaller = total / 2;
      g.padsBegin[i] = autoPad == "SAME_UPPER" ? smaller : total - smaller;
      g.padsEnd[i] = total - g.padsBegin[i];
      continue;
    }
    if (autoPad == "VALID") g.padsBegin[i] = g.padsEnd[i] = 0;
    const Wide padded = Wide{in} + g.padsBegin[i] + g.padsEnd[i];
    if (padded < extent) failNode(node, "kernel extent exceeds the padded input");
    g.output[i] = narrowGeometry(node, (padded - extent) / s + 1, "the output size", i);
  }
  return g;
}

ConvGeometry convTransposeGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                                   const std::vector<int64_t>& weightSpatial) {
  ConvGeometry g = commonGeometry(node, inputSpatial, weightSpatial);
  const size_t n = inputSpatial.size();
  const std::string autoPad = autoPadOf(node);
  g.outputPadding = attrInts(node, "output_padding", std::vector<int64_t>(n, 0));
  if (g.outputPadding.size() != n)
    failNode(node, "attribute 'output_padding' needs " + std::to_string(n) + " values");
  std::vector<int64_t> outputShape = attrInts(node, "output_shape", {});
  if (outputShape.size() == n + 2)
    outputShape.erase(outputShape.begin(), outputShape.begin() + 2);  // N, C given too
  if (!outputShape.empty() && outputShape.size() != n) {
    failNode(node, "attribute 'output_shape' needs " + std::to_string(n) + " values");
  }
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  for (size_t i = 0; i < n; ++i) {
    if (g.outputPadding[i] < 0 || g.outputPadding[i] >= std::max(g.strides[i], g.dilations[i])) {
      failNode(node, "output_padding must be in [0, max(stride, dilation))");
    }
    const int64_t in = inputSpatial[i];
    if (in < 0 || g.kernel[i] < 0) {
      if (!outputShape.empty()) g.output[i] = outputShape[i];
      continue;
    }
    const int64_t s = g.strides[i];
    const Wide full =
        Wide{s} * (in - 1) + g.outputPadding[i] + Wide{g.dilations[i]} * (g.kernel[i] - 1) + 1;
    if (!outputShape.empty() || same) {
      // The pads are derived from the requested output size; the odd unit goes to the end for
      // SAME_UPPER and to the beginning otherwise.
      g.output[i] = outputShape.empty() ? narrowGeometry(node, Wide{in} * s, "the output size", i)
                                        : outputShape[i];
      const int64_t total = narrowGeometry(node, full - g.output[i], "the padding", i);
      const int64_t half = floorDiv(total, 2);
      g.padsBegin[i] = autoPad == "SAME_UPPER" ? half : total - half;
      g.padsEnd[i] = total - g.padsBegin[i];
    } else {
      if (autoPad == "VALID") g.padsBegin[i] = g.padsEnd[i] = 0;
      g.output[i] =
          narrowGeometry(node, full - g.padsBegin[i] - g.padsEnd[i], "the output size", i);
    }
    if (g.output[i] <= 0) failNode(node, "ConvTranspose output size must be positive");
  }
  return g;
}

KILN_REGISTER_OP_SCHEMA({"", "Conv", 1, 1000,
                         [](InferContext& ctx) { inferConvLike(ctx, ConvKind::kConv); }});
KILN_REGISTER_OP_SCHEMA({"", "ConvTranspose", 1, 1000,
                         [](InferContext& ctx) { inferConvLike(ctx, ConvKind::kConvTranspose); }});
KILN_REGISTER_OP_SCHEMA({"", "ConvInteger", 10, 1000,
                         [](InferContext& ctx) { inferConvLike(ctx, ConvKind::kConvInteger); }});

}  // namespace kiln::ir
