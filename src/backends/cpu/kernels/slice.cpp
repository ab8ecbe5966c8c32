// CPU kernel of Slice: a strided view of the input (negative steps read backwards), every dtype.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/ops/shape_rules.h"

namespace kiln::cpu {
namespace {

// Slice keeps starts, ends and axes (attributes before opset 10) for ir::sliceParams.
ir::Node sliceAttrs(const ir::Node& node) {
  return nodeLabelWithAttrs(node, {"starts", "ends", "axes"});
}

void sliceKernel(KernelContext& ctx, const ir::Node& attrs) {
  const Tensor& x = ctx.input(0);
  std::vector<const Tensor*> values;
  std::vector<bool> present;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    present.push_back(ctx.hasInput(i));
    values.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
  }
  ir::SliceParams params = *ir::sliceParams(attrs, values, present, static_cast<int64_t>(x.rank()));
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  Shape outShape = x.shape();
  std::vector<int64_t> strides = inStrides;
  int64_t offset = 0;
  for (size_t i = 0; i < params.axes.size(); ++i) {
    const int64_t axis = params.axes[i];
    ir::SliceAxis s =
        ir::clampSlice(params.starts[i], params.ends[i], params.steps[i], x.dim(axis));
    outShape[axis] = s.count;
    strides[axis] = inStrides[axis] * s.step;
    if (s.count > 0) offset += s.start * inStrides[axis];
  }
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  if (y.numel() > 0) copyStridedTensor(x, offset, strides, y, "Slice");
}

KILN_REGISTER_CPU_KERNEL("Slice", bindKernel(sliceAttrs, sliceKernel));

}  // namespace
}  // namespace kiln::cpu
