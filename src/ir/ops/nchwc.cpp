// Shape rules of the blocked-layout ops ReorderToNchwc, ReorderFromNchwc, NchwcConv, the windowed
// NchwcMaxPool / NchwcAveragePool and the global NchwcGlobalAveragePool / NchwcGlobalMaxPool (see
// nchwc.h).
#include "ir/ops/nchwc.h"
#include "ir/ops/nchwc_groups.h"

#include "ir/ops/conv_geometry.h"
#include "ir/ops/pool_geometry.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// The number of blocks for a channel dim (unknown stays unknown).
Dim blocksOf(const Dim& channels) {
  return channels.isKnown() ? Dim::known(nchwcBlocks(channels.value)) : Dim::unknown();
}

void requireFloat32(const InferContext& ctx, size_t i, const char* name) {
  ctx.requireInput(i);
  if (ctx.inputType(i) != DataType::kFloat32) ctx.fail(std::string(name) + " must be float32");
}

// Fails unless `shape` is a blocked tensor [N, Cb, H, W, 16], with Cb == blocks when both are
// known.
void checkBlocked(const InferContext& ctx, const SymShape& shape, const char* name,
                  const Dim& blocks) {
  if (shape.size() != 5 || (shape[4].isKnown() && shape[4].value != kNchwcBlock)) {
    ctx.fail(std::string(name) + " must be blocked [N, C/16, H, W, 16], got " +
             symShapeToString(shape));
  }
  if (blocks.isKnown() && shape[1].isKnown() && shape[1].value != blocks.value) {
    ctx.fail(std::string(name) + " " + symShapeToString(shape) + " should hold " +
             blocks.toString() + " channel blocks");
  }
}

void inferReorderTo(InferContext& ctx) {
  requireFloat32(ctx, 0, "X");
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  if (x->size() != 4) ctx.fail("X must be 4-D NCHW, got " + symShapeToString(*x));
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{(*x)[0], blocksOf((*x)[1]), (*x)[2], (*x)[3], Dim::known(kNchwcBlock)});
}

void inferReorderFrom(InferContext& ctx) {
  requireFloat32(ctx, 0, "X");
  const int64_t channels = attrInt(ctx.node(), "channels", -1);
  if (channels <= 0) ctx.fail("attribute 'channels' must be positive");
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlocked(ctx, *x, "X", Dim::known(nchwcBlocks(channels)));
  ctx.setOutput(0, DataType::kFloat32, SymShape{(*x)[0], Dim::known(channels), (*x)[2], (*x)[3]});
}

// NchwcConv's X scale S: blocked [N or 1, Cb, 1, 1, 16] with X's channel blocks, for a blocked X
// and group 1 (see nchwc.h).
void checkInputScale(const InferContext& ctx, const SymShape& x, int64_t group) {
  requireFloat32(ctx, 4, "X scale S");
  if (group != 1 || x.size() != 5) ctx.fail("the X scale S needs a blocked X and group 1");
  const SymShape* scale = ctx.inputShape(4);
  if (!scale) return;
  checkBlocked(ctx, *scale, "X scale S", x[1]);
  auto is = [](const Dim& d, int64_t v) { return d.isKnown() && d.value == v; };
  const bool batchOk = is((*scale)[0], 1) || (*scale)[0] == x[0];
  if (!batchOk || !is((*scale)[2], 1) || !is((*scale)[3], 1)) {
    ctx.fail("X scale S " + symShapeToString(*scale) + " must be [N or 1, C/16, 1, 1, 16] for X " +
             symShapeToString(x));
  }
}

void inferNchwcConv(InferContext& ctx) {
  requireFloat32(ctx, 0, "X");
  requireFloat32(ctx, 1, "W");
  if (ctx.hasInput(2)) requireFloat32(ctx, 2, "B");
  if (ctx.hasInput(3)) requireFloat32(ctx, 3, "Z");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* w = ctx.inputShape(1);
  if (!w || w->size() != 4) ctx.fail("W must be 4-D [Co, Ci / group, kH, kW]");
  const int64_t group = attrInt(ctx.node(), "group", 1);
  const Dim& outChannels = (*w)[0];
  Dim inChannels = (*w)[1];
  if (group != 1) {
    const bool known = (*w)[1].isKnown() && outChannels.isKnown();
    const NchwcGroupSlices slices =
        known ? nchwcGroupSlices((*w)[1].value * group, outChannels.value, group)
              : NchwcGroupSlices{};
    const bool depthwise = known && (*w)[1].value == 1 && outChannels.value == group;
    if (!depthwise && slices.slices == 0) {
      ctx.fail(
          "a grouped NchwcConv must be depthwise (W [group, 1, kH, kW]) or split into whole "
          "channel blocks, "
          "got W " +
          symShapeToString(*w) + " with group " + std::to_string(group) +
          (known ? ": " + slices.whyNot : std::string()));
    }
    inChannels = Dim::known(multiplyDims(ctx.node(), (*w)[1].value, group, "W's dim 1 x group"));
  }
  if (ctx.hasInput(2)) {
    const SymShape* b = ctx.inputShape(2);
    if (b && (b->size() != 1 ||
              (outChannels.isKnown() && (*b)[0].isKnown() && (*b)[0].value != outChannels.value))) {
      ctx.fail("bias must be 1-D with one value per output channel");
    }
  }
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  if (x->size() == 4) {
    if (group != 1) ctx.fail("a grouped NchwcConv needs a blocked X, got " + symShapeToString(*x));
    if ((*x)[1].isKnown() && inChannels.isKnown() && (*x)[1].value != inChannels.value) {
      ctx.fail("X " + symShapeToString(*x) + " has " + (*x)[1].toString() +
               " channels but W expects " + inChannels.toString());
    }
  } else {
    checkBlocked(ctx, *x, "X", blocksOf(inChannels));
  }
  const ConvGeometry g =
      convGeometry(ctx.node(), {(*x)[2].value, (*x)[3].value}, {(*w)[2].value, (*w)[3].value});
  auto spatial = [](int64_t d) { return d >= 0 ? Dim::known(d) : Dim::unknown(); };
  const SymShape y{(*x)[0], blocksOf(outChannels), spatial(g.output[0]), spatial(g.output[1]),
                   Dim::known(kNchwcBlock)};
  if (ctx.hasInput(3)) {
    const SymShape* z = ctx.inputShape(3);
    if (z) checkBlocked(ctx, *z, "residual Z", y[1]);
  }
  if (ctx.hasInput(4)) checkInputScale(ctx, *x, group);
  ctx.setOutput(0, DataType::kFloat32, y);
}

// NchwcMaxPool / NchwcAveragePool: MaxPool's / AveragePool's 2-D window over H and W of a blocked
// X.
void inferNchwcPool(InferContext& ctx) {
  requireFloat32(ctx, 0, "X");
  if (ctx.node().outputs.size() != 1) ctx.fail("has one output (no Indices)");
  const SymShape* x = ctx.inputShape(0);
  const PoolAttrs attrs = readPoolAttrs(ctx.node(), 2);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlocked(ctx, *x, "X", Dim::unknown());
  ctx.setOutput(0, DataType::kFloat32, pooledShape(ctx.node(), attrs, *x));
}

// NchwcGlobalAveragePool / NchwcGlobalMaxPool: [N, Cb, H, W, 16] -> [N, Cb, 1, 1, 16].
void inferNchwcGlobalPool(InferContext& ctx) {
  requireFloat32(ctx, 0, "X");
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  checkBlocked(ctx, *x, "X", Dim::unknown());
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{(*x)[0], (*x)[1], Dim::known(1), Dim::known(1), Dim::known(kNchwcBlock)});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"kiln", "ReorderToNchwc", 1, 1000, inferReorderTo});
KILN_REGISTER_OP_SCHEMA({"kiln", "ReorderFromNchwc", 1, 1000, inferReorderFrom});
KILN_REGISTER_OP_SCHEMA({"kiln", "NchwcConv", 1, 1000, inferNchwcConv});
KILN_REGISTER_OP_SCHEMA({"kiln", "NchwcMaxPool", 1, 1000, inferNchwcPool});
KILN_REGISTER_OP_SCHEMA({"kiln", "NchwcAveragePool", 1, 1000, inferNchwcPool});
KILN_REGISTER_OP_SCHEMA({"kiln", "NchwcGlobalAveragePool", 1, 1000, inferNchwcGlobalPool});
KILN_REGISTER_OP_SCHEMA({"kiln", "NchwcGlobalMaxPool", 1, 1000, inferNchwcGlobalPool});

}  // namespace kiln::ir
