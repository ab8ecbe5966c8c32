// CPU kernels of ScatterND, ScatterElements and Scatter (opset 9-10): a copy of the data with
// elements replaced or combined (reduction add/mul/max/min) with updates at given indices.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction reductionOf(const ir::Node& node) {
  std::string r = ir::attrString(node, "reduction", "none");
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Reduction::kNone;
}

struct ScatterAttrs {
  std::string opType;
  Reduction reduction = Reduction::kNone;
  int64_t axis = 0;  // ScatterElements and Scatter
};

ScatterAttrs scatterAttrs(const ir::Node& node) {
  return {node.opType, reductionOf(node), ir::attrInt(node, "axis", 0)};
}

// Writes run r of `count` updates (updates[r * count...]) into out at outOffsets[r].
void applyUpdates(const ScatterAttrs& attrs, const Tensor& updates, Tensor& out,
                  const std::vector<int64_t>& outOffsets, int64_t count) {
  const Reduction reduction = attrs.reduction;
  if (reduction == Reduction::kNone) {
    dispatchStorage(out.dtype(), attrs.opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = updates.data<T>();
      T* dst = out.data<T>();
      for (size_t r = 0; r < outOffsets.size(); ++r)
        std::copy(src + r * count, src + (r + 1) * count, dst + outOffsets[r]);
    });
    return;
  }
  dispatchNumeric(out.dtype(), attrs.opType.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* src = updates.data<T>();
    T* dst = out.data<T>();
    auto combine = [reduction](C a, C b) -> C {
      switch (reduction) {
        case Reduction::kAdd:
          return a + b;
        case Reduction::kMul:
          return a * b;
        case Reduction::kMax:
          return std::max(a, b);
        default:
          return std::min(a, b);
      }
    };
    for (size_t r = 0; r < outOffsets.size(); ++r) {
      T* d = dst + outOffsets[r];
      const T* s = src + r * count;
      for (int64_t i = 0; i < count; ++i) d[i] = static_cast<T>(combine(C(d[i]), C(s[i])));
    }
  });
}

void scatterNDKernel(KernelContext& ctx, const ScatterAttrs& attrs) {
  const Tensor& data = ctx.input(0);
  const Tensor& indexTensor = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (indexTensor.rank() == 0)
    ctx.fail("indices must have rank 1 or more", ErrorCode::kInvalidArgument);
  const size_t k = static_cast<size_t>(indexTensor.dim(indexTensor.rank() - 1));
  if (k > data.rank())
    ctx.fail("index tuples are longer than the data's rank", ErrorCode::kInvalidArgument);
  Shape expected(indexTensor.shape().begin(), indexTensor.shape().end() - 1);
  expected.insert(expected.end(), data.shape().begin() + k, data.shape().end());
  if (updates.shape() != expected) {
    ctx.fail(
        "updates shape " + shapeToString(updates.shape()) + " should be " + shapeToString(expected),
        ErrorCode::kInvalidArgument);
  }
  const std::vector<int64_t> indices = indexValues(ctx, indexTensor);
  const std::vector<int64_t> strides = contiguousStrides(data.shape());
  const int64_t slice = shapeNumel(Shape(data.shape().begin() + k, data.shape().end()));
  const size_t tuples = static_cast<size_t>(
      shapeNumel(Shape(indexTensor.shape().begin(), indexTensor.shape().end() - 1)));
  std::vector<int64_t> offsets(tuples, 0);
  for (size_t t = 0; t < tuples; ++t)
    for (size_t j = 0; j < k; ++j)
      offsets[t] += checkedIndex(ctx, indices[t * k + j], data.dim(j)) * strides[j];
  ctx.setOutput(0, data.clone());
  applyUpdates(attrs, updates, ctx.output(0), offsets, slice);
}

void scatterElementsKernel(KernelContext& ctx, const ScatterAttrs& attrs) {
  const Tensor& data = ctx.input(0);
  const Tensor& indexTensor = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (updates.shape() != indexTensor.shape()) {
    ctx.fail("updates shape " + shapeToString(updates.shape()) + " differs from indices shape " +
                 shapeToString(indexTensor.shape()),
             ErrorCode::kInvalidArgument);
  }
  const int64_t axis = normalizeAxis(ctx, attrs.axis, static_cast<int64_t>(data.rank()));
  const std::vector<int64_t> offsets = elementOffsets(ctx, data.shape(), indexTensor, axis);
  ctx.setOutput(0, data.clone());
  applyUpdates(attrs, updates, ctx.output(0), offsets, 1);
}

KILN_REGISTER_CPU_KERNEL("ScatterND", bindKernel(scatterAttrs, scatterNDKernel));
KILN_REGISTER_CPU_KERNEL("ScatterElements", bindKernel(scatterAttrs, scatterElementsKernel));
KILN_REGISTER_CPU_KERNEL("Scatter", bindKernel(scatterAttrs, scatterElementsKernel));

}  // namespace
}  // namespace kiln::cpu
