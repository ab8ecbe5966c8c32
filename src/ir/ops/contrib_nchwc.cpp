// Shape rules of onnxruntime's com.microsoft.nchwc ops (opset 1): ReorderInput, ReorderOutput,
// Conv, MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool and Upsample on blocked 4-D
// tensors [N, Cp, H, W] whose channel count Cp is a multiple of the CPU's block size (see
// contrib_nchwc.h).
#include "ir/ops/contrib_nchwc.h"

#include <cstdlib>
#include <string>

#include "ir/ops/conv_geometry.h"
#include "ir/ops/pool_geometry.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {

int64_t ortNchwcBlockSize() {
  if (const char* forced = std::getenv("KILN_ORT_NCHWC_BLOCK")) {
    const std::string value(forced);
    if (value == "8") return 8;
    if (value == "16") return 16;
  }
  return __builtin_cpu_supports("avx512f") ? 16 : 8;
}

namespace {

const char* const kInputNames[] = {"X", "W", "B", "Sum"};

void requireFloat32(const InferContext& ctx, size_t i) {
  ctx.requireInput(i);
  if (ctx.inputType(i) != DataType::kFloat32) {
    ctx.fail(std::string("input ") + std::to_string(i) + " (" + kInputNames[i] +
             ") must be float32, got " + dataTypeName(ctx.inputType(i)));
  }
}

// X's shape, checked to be 4-D; null when unknown.
const SymShape* rank4Input(const InferContext& ctx, size_t i) {
  requireFloat32(ctx, i);
  const SymShape* s = ctx.inputShape(i);
  if (s && s->size() != 4) {
    ctx.fail(std::string("input ") + std::to_string(i) + " (" + kInputNames[i] +
             ") must be 4-D, got " + symShapeToString(*s));
  }
  return s;
}

std::string blockText(int64_t block) {
  return "the NCHWc block size " + std::to_string(block) +
         " of this CPU (onnxruntime's MlasNchwcGetBlockSize; the file may have been saved on a "
         "CPU with another)";
}

// Fails unless a known channel dim of the blocked input X is a multiple of the block.
void checkBlockedChannels(const InferContext& ctx, const SymShape& x, int64_t block) {
  if (x[1].isKnown() && x[1].value % block != 0) {
    ctx.fail("input 0 (X) " + symShapeToString(x) + " is not blocked: its " +
             std::to_string(x[1].value) + " channels are not a multiple of " + blockText(block));
  }
}

Dim knownOrUnknown(int64_t v) { return v >= 0 ? Dim::known(v) : Dim::unknown(); }

void inferReorderInput(InferContext& ctx) {
  const SymShape* x = rank4Input(ctx, 0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  const bool channelsLast = attrInt(ctx.node(), "channels_last", 0) != 0;
  const Dim& c = channelsLast ? (*x)[3] : (*x)[1];
  const int64_t block = ortNchwcBlockSize();
  const Dim cp = c.isKnown() ? Dim::known(roundUpToBlock(c.value, block)) : Dim::unknown();
  const SymShape y = channelsLast ? SymShape{(*x)[0], cp, (*x)[1], (*x)[2]}
                                  : SymShape{(*x)[0], cp, (*x)[2], (*x)[3]};
  ctx.setOutput(0, DataType::kFloat32, y);
}

void inferReorderOutput(InferContext& ctx) {
  const int64_t channels = attrInt(ctx.node(), "channels", 0);
  if (channels <= 0) {
    ctx.fail("attribute 'channels' must be positive, got " + std::to_string(channels));
  }
  const SymShape* x = rank4Input(ctx, 0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  const int64_t block = ortNchwcBlockSize();
  checkBlockedChannels(ctx, *x, block);
  if ((*x)[1].isKnown() && (channels > (*x)[1].value || (*x)[1].value - channels >= block)) {
    ctx.fail("attribute 'channels' " + std::to_string(channels) + " does not fit input 0 (X) " +
             symShapeToString(*x) + ": its " + std::to_string((*x)[1].value) +
             " channels are 'channels' rounded up to " + blockText(block));
  }
  const Dim c = Dim::known(channels);
  const bool channelsLast = attrInt(ctx.node(), "channels_last", 0) != 0;
  ctx.setOutput(0, DataType::kFloat32,
                channelsLast ? SymShape{(*x)[0], (*x)[2], (*x)[3], c}
                             : SymShape{(*x)[0], c, (*x)[2], (*x)[3]});
}

// W [Co, Ci / group, kH, kW] with Co a multiple of the block; X plain (Ci < block, group 1) or
// blocked (Ci a multiple of the block).
void checkConvInputs(const InferContext& ctx, const SymShape* x, const SymShape& w, int64_t block) {
  const int64_t group = attrInt(ctx.node(), "group", 1);
  if (group < 1) ctx.fail("attribute 'group' must be positive, got " + std::to_string(group));
  if (w[0].isKnown() && w[0].value % block != 0) {
    ctx.fail("input 1 (W) " + symShapeToString(w) + " has " + std::to_string(w[0].value) +
             " output channels, not a multiple of " + blockText(block));
  }
  if (!x || !(*x)[1].isKnown() || !w[1].isKnown()) return;
  const int64_t ci = (*x)[1].value;
  if (ci != w[1].value * group) {
    ctx.fail("input 0 (X) " + symShapeToString(*x) + " has " + std::to_string(ci) +
             " channels but W " + symShapeToString(w) + " with group " + std::to_string(group) +
             " expects " + std::to_string(w[1].value * group));
  }
  if (ci >= block && ci % block != 0) {
    ctx.fail("input 0 (X) " + symShapeToString(*x) + " is neither plain (fewer channels than " +
             std::to_string(block) + ") nor blocked (a multiple of " + blockText(block) + ")");
  }
  if (ci < block && group != 1) {
    ctx.fail("a grouped Conv needs a blocked X, got " + symShapeToString(*x));
  }
}

void inferConv(InferContext& ctx) {
  const SymShape* x = rank4Input(ctx, 0);
  const SymShape* w = rank4Input(ctx, 1);
  if (ctx.hasInput(2)) requireFloat32(ctx, 2);
  if (ctx.hasInput(3)) rank4Input(ctx, 3);
  const int64_t block = ortNchwcBlockSize();
  if (!w) ctx.fail("input 1 (W) needs a known shape [Co, Ci / group, kH, kW]");
  checkConvInputs(ctx, x, *w, block);
  if (ctx.hasInput(2)) {
    const SymShape* b = ctx.inputShape(2);
    if (b && (b->size() != 1 ||
              ((*b)[0].isKnown() && (*w)[0].isKnown() && (*b)[0].value != (*w)[0].value))) {
      ctx.fail("input 2 (B) " + symShapeToString(*b) + " must be 1-D with one value per row of W " +
               symShapeToString(*w));
    }
  }
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  const ConvGeometry g =
      convGeometry(ctx.node(), {(*x)[2].value, (*x)[3].value}, {(*w)[2].value, (*w)[3].value});
  const SymShape y{(*x)[0], (*w)[0], knownOrUnknown(g.output[0]), knownOrUnknown(g.output[1])};
  if (ctx.hasInput(3)) {
    const SymShape* sum = ctx.inputShape(3);
    if (sum) {
      for (size_t i = 0; i < 4; ++i) {
        if (y[i].isKnown() && (*sum)[i].isKnown() && y[i].value != (*sum)[i].value) {
          ctx.fail("input 3 (Sum) " + symShapeToString(*sum) + " must have the output's shape " +
                   symShapeToString(y));
        }
      }
    }
  }
  ctx.setOutput(0, DataType::kFloat32, y);
}

void inferPool(InferContext& ctx) {
  if (ctx.node().outputs.size() != 1) ctx.fail("has one output (no Indices)");
  const SymShape* x = rank4Input(ctx, 0);
  const PoolAttrs attrs = readPoolAttrs(ctx.node(), 2);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlockedChannels(ctx, *x, ortNchwcBlockSize());
  ctx.setOutput(0, DataType::kFloat32, pooledShape(ctx.node(), attrs, *x));
}

void inferGlobalPool(InferContext& ctx) {
  const SymShape* x = rank4Input(ctx, 0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlockedChannels(ctx, *x, ortNchwcBlockSize());
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*x)[0], (*x)[1], Dim::known(1), Dim::known(1)});
}

void inferUpsample(InferContext& ctx) {
  const Node& node = ctx.node();
  const std::vector<int64_t> scales = attrInts(node, "scales", {});
  if (scales.size() != 4 || scales[0] != 1 || scales[1] != 1 || scales[2] < 1 || scales[3] < 1) {
    ctx.fail("attribute 'scales' must be [1, 1, sH, sW] with sH, sW >= 1");
  }
  const std::string mode = attrString(node, "mode", "nearest");
  if (mode != "nearest" && mode != "linear") {
    ctx.fail("attribute 'mode' must be nearest or linear, got '" + mode + "'",
             ErrorCode::kUnsupportedNode);
  }
  const std::string transform = attrString(node, "coordinate_transformation_mode", "asymmetric");
  if (transform != "asymmetric" && transform != "align_corners" && transform != "half_pixel") {
    ctx.fail("coordinate_transformation_mode '" + transform +
                 "' is not one of asymmetric, align_corners, half_pixel",
             ErrorCode::kUnsupportedNode);
  }
  if (mode == "nearest" && transform != "asymmetric") {
    ctx.fail(
        "mode nearest needs coordinate_transformation_mode asymmetric (as onnxruntime), got '" +
            transform + "'",
        ErrorCode::kUnsupportedNode);
  }
  const SymShape* x = rank4Input(ctx, 0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlockedChannels(ctx, *x, ortNchwcBlockSize());
  auto scaled = [&ctx](const Dim& d, int64_t s) {
    return productDims(ctx.node(), d, s, "the upsampled size");
  };
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{(*x)[0], (*x)[1], scaled((*x)[2], scales[2]), scaled((*x)[3], scales[3])});
}

}  // namespace

#define KILN_NCHWC_SCHEMA(op, fn) KILN_REGISTER_OP_SCHEMA({"com.microsoft.nchwc", op, 1, 1000, fn})

KILN_NCHWC_SCHEMA("ReorderInput", inferReorderInput);
KILN_NCHWC_SCHEMA("ReorderOutput", inferReorderOutput);
KILN_NCHWC_SCHEMA("Conv", inferConv);
KILN_NCHWC_SCHEMA("MaxPool", inferPool);
KILN_NCHWC_SCHEMA("AveragePool", inferPool);
KILN_NCHWC_SCHEMA("GlobalMaxPool", inferGlobalPool);
KILN_NCHWC_SCHEMA("GlobalAveragePool", inferGlobalPool);
KILN_NCHWC_SCHEMA("Upsample", inferUpsample);

}  // namespace kiln::ir
