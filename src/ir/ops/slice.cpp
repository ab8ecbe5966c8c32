// Shape rules of Slice: parameters as attributes (opset 1-9) or inputs (10+), negative steps,
// clamping.
#include <algorithm>
#include <limits>

#include "ir/ops/shape_rules.h"

namespace kiln::ir {

SliceAxis clampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceAxis s;
  s.step = step;
  if (step > 0) {
    s.start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    s.count = end > s.start ? (end - s.start - 1) / step + 1 : 0;
  } else {
    s.start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    // -step cannot overflow: steps are limited to [-INT64_MAX, -1] by sliceParams.
    s.count = s.start > end ? (s.start - end - 1) / -step + 1 : 0;
  }
  if (dim == 0) s.count = 0;
  return s;
}

std::optional<SliceParams> sliceParams(const Node& node, const std::vector<const Tensor*>& inputs,
                                       const std::vector<bool>& present, int64_t rank) {
  SliceParams p;
  bool hasAxes = false, hasSteps = false;
  if (node.opset < 10) {
    p.starts = attrInts(node, "starts");
    p.ends = attrInts(node, "ends");
    hasAxes = hasAttr(node, "axes");
    if (hasAxes) p.axes = attrInts(node, "axes");
  } else {
    auto value = [&](size_t i) -> const Tensor* {
      return i < inputs.size() && present[i] ? inputs[i] : nullptr;
    };
    if (!value(1) || !value(2)) return std::nullopt;
    p.starts = value(1)->toInt64Vector();
    p.ends = value(2)->toInt64Vector();
    hasAxes = present.size() > 3 && present[3];
    hasSteps = present.size() > 4 && present[4];
    if ((hasAxes && !value(3)) || (hasSteps && !value(4))) return std::nullopt;
    if (hasAxes) p.axes = value(3)->toInt64Vector();
    if (hasSteps) p.steps = value(4)->toInt64Vector();
  }
  const size_t n = p.starts.size();
  if (!hasAxes) {
    for (size_t i = 0; i < n; ++i) p.axes.push_back(static_cast<int64_t>(i));
  }
  if (!hasSteps) p.steps.assign(n, 1);
  if (p.ends.size() != n || p.axes.size() != n || p.steps.size() != n) {
    failNode(node, "starts, ends, axes and steps have different lengths");
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < n; ++i) {
    p.axes[i] = normalizeAxis(node, p.axes[i], rank);
    if (seen[p.axes[i]]) failNode(node, "axis " + std::to_string(p.axes[i]) + " is repeated");
    seen[p.axes[i]] = true;
    if (p.steps[i] == 0) failNode(node, "step is 0", ErrorCode::kInvalidArgument);
    p.steps[i] = std::max(p.steps[i], -std::numeric_limits<int64_t>::max());
  }
  return p;
}

namespace {

// Slice bounds unknown at build time: the sliced axes lose their size, the others keep it.
SymShape slicedAxesUnknown(const InferContext& ctx, const SymShape& in) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::optional<std::vector<int64_t>> axes;
  if (ctx.hasInput(3)) {
    axes = ctx.inputInts(3);
  } else if (auto startsShape = ctx.inputConcreteShape(1);
             startsShape && startsShape->size() == 1) {
    const int64_t count = (*startsShape)[0];
    if (count > rank) {  // declared dims, not values: a bad file may claim 2^31 starts
      failNode(ctx.node(),
               "input 1 (starts) has " + std::to_string(count) + " elements, more than the " +
                   std::to_string(rank) + " axes of input 0",
               ErrorCode::kInvalidArgument);
    }
    axes = std::vector<int64_t>(static_cast<size_t>(count));
    for (size_t i = 0; i < axes->size(); ++i) (*axes)[i] = static_cast<int64_t>(i);
  }
  if (!axes) return SymShape(in.size(), Dim::unknown());
  SymShape out = in;
  for (int64_t a : *axes) out[normalizeAxis(ctx, a, rank)] = Dim::unknown();
  return out;
}

void inferSlice(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, type);
    return;
  }
  std::vector<const Tensor*> values;
  std::vector<bool> present;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    present.push_back(ctx.hasInput(i));
    values.push_back(ctx.inputValue(i));
  }
  auto params = sliceParams(ctx.node(), values, present, static_cast<int64_t>(in->size()));
  if (!params) {
    ctx.setOutput(0, type, slicedAxesUnknown(ctx, *in));
    return;
  }
  SymShape out = *in;
  for (size_t i = 0; i < params->axes.size(); ++i) {
    Dim& d = out[params->axes[i]];
    const int64_t start = params->starts[i], end = params->ends[i], step = params->steps[i];
    if (d.isKnown()) {
      d = Dim::known(clampSlice(start, end, step, d.value).count);
    } else if (!(start == 0 && step == 1 && end >= std::numeric_limits<int32_t>::max())) {
      d = Dim::unknown();  // a whole symbolic axis ([0:INT_MAX]) keeps its name
    }
  }
  ctx.setOutput(0, type, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Slice", 1, 1000, inferSlice});

}  // namespace kiln::ir
