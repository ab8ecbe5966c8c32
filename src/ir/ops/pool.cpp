// Shape and type rules of the pooling operators (windowed, global, unpooling and ROI pooling).
#include <limits>

#include "ir/ops/pool_geometry.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireFloat(InferContext& ctx, size_t i) {
  if (!isFloatingPoint(ctx.inputType(i))) {
    ctx.fail("expects a floating-point input, got " + dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

// Input 0 is N x C x D1 x ... x Dn; returns its shape or nullptr when the rank is unknown.
const SymShape* poolInputShape(InferContext& ctx) {
  const SymShape* s = ctx.inputShape(0);
  if (s && s->size() < 3)
    ctx.fail("expects an input of rank >= 3 (N x C x spatial...), got rank " +
             std::to_string(s->size()));
  return s;
}

// Output 0 (and the Indices output of MaxPool) of a windowed pool.
void inferWindowPool(InferContext& ctx) {
  DataType dtype = ctx.inputType(0);
  const SymShape* in = poolInputShape(ctx);
  if (!in) {
    ctx.setOutputType(0, dtype);
    ctx.setOutputType(1, DataType::kInt64);
    return;
  }
  PoolAttrs attrs = readPoolAttrs(ctx.node(), in->size() - 2);
  SymShape out = {(*in)[0], (*in)[1]};
  for (size_t i = 2; i < in->size(); ++i) {
    out.push_back((*in)[i].isKnown()
                      ? Dim::known(resolvePoolDim(ctx.node(), attrs, i - 2, (*in)[i].value).out)
                      : Dim::unknown());
  }
  ctx.setOutput(0, dtype, out);
  ctx.setOutput(1, DataType::kInt64, out);
}

void inferMaxPool(InferContext& ctx) {
  DataType t = ctx.inputType(0);
  if (!isFloatingPoint(t) && t != DataType::kInt8 && t != DataType::kUint8) {
    ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  }
  const std::vector<int>& outputs = ctx.node().outputs;
  if (ctx.opset() < 8 && outputs.size() > 1 && outputs[1] != kNoValue)
    ctx.fail("the Indices output exists from opset 8");
  int64_t storageOrder = attrInt(ctx.node(), "storage_order", 0);
  if (storageOrder != 0 && storageOrder != 1) ctx.fail("storage_order must be 0 or 1");
  inferWindowPool(ctx);
}

void inferFloatWindowPool(InferContext& ctx) {
  requireFloat(ctx, 0);
  inferWindowPool(ctx);
}

void inferGlobalPool(InferContext& ctx) {
  requireFloat(ctx, 0);
  const SymShape* in = poolInputShape(ctx);
  if (!in) return ctx.setOutputType(0, ctx.inputType(0));
  SymShape out = {(*in)[0], (*in)[1]};
  out.resize(in->size(), Dim::known(1));
  ctx.setOutput(0, ctx.inputType(0), out);
}

void inferMaxUnpool(InferContext& ctx) {
  requireFloat(ctx, 0);
  if (ctx.inputType(1) != DataType::kInt64) ctx.fail("input 'I' must be int64");
  DataType dtype = ctx.inputType(0);
  const SymShape* in = poolInputShape(ctx);
  if (ctx.hasInput(2)) {
    std::optional<std::vector<int64_t>> shape = ctx.inputInts(2);
    if (shape) {
      if (in && shape->size() != in->size()) ctx.fail("output_shape must have the input's rank");
      for (int64_t d : *shape) {
        if (d < 0) ctx.fail("output_shape must not be negative");
      }
      return ctx.setOutput(0, dtype, Shape(*shape));
    }
    if (!in) return ctx.setOutputType(0, dtype);
    return ctx.setOutput(0, dtype, SymShape(in->size(), Dim::unknown()));
  }
  if (!in) return ctx.setOutputType(0, dtype);
  PoolAttrs attrs = readPoolAttrs(ctx.node(), in->size() - 2);
  SymShape out = {(*in)[0], (*in)[1]};
  for (size_t i = 2; i < in->size(); ++i) {
    const Dim& d = (*in)[i];
    size_t s = i - 2;
    if (!d.isKnown() || d.value < 0) {
      out.push_back(Dim::unknown());
      continue;
    }
    // In 128 bits: dims and attributes as large as int64 holds.
    using Wide = __int128;
    const Wide size = (Wide{d.value} - 1) * attrs.strides[s] + attrs.kernel[s] - attrs.pads[s] -
                      attrs.pads[s + attrs.kernel.size()];
    if (size < 0) ctx.fail("pads are larger than the unpooled output");
    if (size > std::numeric_limits<int64_t>::max())
      ctx.fail("the unpooled size of spatial axis " + std::to_string(s) + " is past int64");
    out.push_back(Dim::known(static_cast<int64_t>(size)));
  }
  ctx.setOutput(0, dtype, out);
}

// Both ROI ops output num_rois x C x pooledHeight x pooledWidth.
void setRoiOutput(InferContext& ctx, int64_t height, int64_t width) {
  if (height < 1 || width < 1) ctx.fail("the pooled output size must be positive");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* rois = ctx.inputShape(1);
  if (x && x->size() != 4) ctx.fail("expects a 4-D input X");
  if (rois && rois->size() != 2) ctx.fail("expects 2-D rois");
  Dim numRois = rois ? (*rois)[0] : Dim::unknown();
  Dim channels = x ? (*x)[1] : Dim::unknown();
  ctx.setOutput(0, ctx.inputType(0),
                SymShape{numRois, channels, Dim::known(height), Dim::known(width)});
}

void inferMaxRoiPool(InferContext& ctx) {
  requireFloat(ctx, 0);
  std::vector<int64_t> pooled = attrInts(ctx.node(), "pooled_shape");
  if (pooled.size() != 2) ctx.fail("pooled_shape must have 2 values");
  setRoiOutput(ctx, pooled[0], pooled[1]);
}

void inferRoiAlign(InferContext& ctx) {
  requireFloat(ctx, 0);
  if (ctx.inputType(1) != ctx.inputType(0)) ctx.fail("rois must have the type of X");
  DataType bt = ctx.inputType(2);
  if (bt != DataType::kInt64 && bt != DataType::kInt32) ctx.fail("batch_indices must be int64");
  std::string mode = attrString(ctx.node(), "mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail("mode must be 'avg' or 'max', got '" + mode + "'");
  setRoiOutput(ctx, attrInt(ctx.node(), "output_height", 1),
               attrInt(ctx.node(), "output_width", 1));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "MaxPool", 1, 1000, inferMaxPool});
KILN_REGISTER_OP_SCHEMA({"", "AveragePool", 1, 1000, inferFloatWindowPool});
KILN_REGISTER_OP_SCHEMA({"", "LpPool", 1, 1000, inferFloatWindowPool});
KILN_REGISTER_OP_SCHEMA({"", "GlobalAveragePool", 1, 1000, inferGlobalPool});
KILN_REGISTER_OP_SCHEMA({"", "GlobalMaxPool", 1, 1000, inferGlobalPool});
KILN_REGISTER_OP_SCHEMA({"", "GlobalLpPool", 1, 1000, inferGlobalPool});
KILN_REGISTER_OP_SCHEMA({"", "MaxUnpool", 9, 1000, inferMaxUnpool});
KILN_REGISTER_OP_SCHEMA({"", "MaxRoiPool", 1, 1000, inferMaxRoiPool});
KILN_REGISTER_OP_SCHEMA({"", "RoiAlign", 10, 1000, inferRoiAlign});

}  // namespace kiln::ir
