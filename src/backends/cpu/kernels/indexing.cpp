// CPU kernels of ops that read elements by index: Gather, GatherElements, GatherND, OneHot.
// Indices may be negative (counted from the end); out-of-range indices are errors.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

// The "axis" attribute of Gather, GatherElements (default 0) and OneHot (default -1).
int64_t axisAttr(const ir::Node& node) {
  return ir::attrInt(node, "axis", node.opType == "OneHot" ? -1 : 0);
}

void gatherKernel(KernelContext& ctx, int64_t axisAttr) {
  const Tensor& data = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t axis = normalizeAxis(ctx, axisAttr, static_cast<int64_t>(data.rank()));
  const int64_t axisDim = data.dim(axis);
  std::vector<int64_t> indices = indexValues(ctx, ctx.input(1));
  for (int64_t& i : indices) i = checkedIndex(ctx, i, axisDim);
  const int64_t outer = dimProduct(data.shape(), 0, axis);
  const int64_t inner = dimProduct(data.shape(), axis + 1, data.rank());
  const int64_t count = static_cast<int64_t>(indices.size());
  dispatchStorage(data.dtype(), "Gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = data.data<T>();
    T* out = y.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      const T* block = in + o * axisDim * inner;
      if (inner == 1) {
        for (int64_t j = 0; j < count; ++j) out[j] = block[indices[j]];
      } else {
        for (int64_t j = 0; j < count; ++j)
          std::copy(block + indices[j] * inner, block + (indices[j] + 1) * inner, out + j * inner);
      }
      out += count * inner;
    }
  });
}

void gatherElementsKernel(KernelContext& ctx, int64_t axisAttr) {
  const Tensor& data = ctx.input(0);
  const Tensor& indexTensor = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t axis = normalizeAxis(ctx, axisAttr, static_cast<int64_t>(data.rank()));
  const std::vector<int64_t> offsets = elementOffsets(ctx, data.shape(), indexTensor, axis);
  dispatchStorage(data.dtype(), "GatherElements", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = data.data<T>();
    T* out = y.data<T>();
    for (size_t i = 0; i < offsets.size(); ++i) out[i] = in[offsets[i]];
  });
}

// GatherND's batch_dims (opset 12 on).
size_t batchDimsAttr(const ir::Node& node) {
  return static_cast<size_t>(node.opset >= 12 ? ir::attrInt(node, "batch_dims", 0) : 0);
}

void gatherNDKernel(KernelContext& ctx, size_t batchDims) {
  const Tensor& data = ctx.input(0);
  const Tensor& indexTensor = ctx.input(1);
  Tensor& y = ctx.output(0);
  const size_t b = batchDims;
  const size_t k = static_cast<size_t>(indexTensor.dim(indexTensor.rank() - 1));
  for (size_t d = 0; d < b; ++d) {
    if (indexTensor.dim(d) != data.dim(d))
      ctx.fail("batch dims of data and indices differ", ErrorCode::kInvalidArgument);
  }
  const std::vector<int64_t> indices = indexValues(ctx, indexTensor);
  const int64_t batches = dimProduct(data.shape(), 0, b);
  const int64_t batchSize = dimProduct(data.shape(), b, data.rank());
  const int64_t slice = dimProduct(data.shape(), b + k, data.rank());
  const int64_t tuples = k == 0 ? 0 : static_cast<int64_t>(indices.size() / k);
  const int64_t tuplesPerBatch = batches == 0 ? 0 : tuples / batches;
  const std::vector<int64_t> strides = contiguousStrides(data.shape());
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (t / tuplesPerBatch) * batchSize;
    for (size_t j = 0; j < k; ++j)
      off += checkedIndex(ctx, indices[t * k + j], data.dim(b + j)) * strides[b + j];
    offsets[t] = off;
  }
  dispatchStorage(data.dtype(), "GatherND", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = data.data<T>();
    T* out = y.data<T>();
    for (int64_t t = 0; t < tuples; ++t)
      std::copy(in + offsets[t], in + offsets[t] + slice, out + t * slice);
  });
}

void oneHotKernel(KernelContext& ctx, int64_t axisAttr) {
  const Tensor& values = ctx.input(2);
  Tensor& y = ctx.output(0);
  const int64_t rank = static_cast<int64_t>(y.rank());
  const int64_t axis = normalizeAxis(ctx, axisAttr, rank);
  const int64_t depth = y.dim(axis);
  const int64_t inner = dimProduct(y.shape(), axis + 1, rank);
  const int64_t outer = dimProduct(y.shape(), 0, axis);
  if (values.numel() != 2)
    ctx.fail("values must hold [off, on], got " + values.describe(), ErrorCode::kInvalidArgument);
  const std::vector<int64_t> positions = ctx.input(0).toInt64Vector();
  dispatchStorage(y.dtype(), "OneHot", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T off = values.data<T>()[0], on = values.data<T>()[1];
    T* out = y.data<T>();
    std::fill(out, out + y.numel(), off);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = positions[o * inner + i];
        if (v < 0) v += depth;
        if (v >= 0 && v < depth) out[(o * depth + v) * inner + i] = on;  // out-of-range: all off
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Gather", bindKernel(axisAttr, gatherKernel));
KILN_REGISTER_CPU_KERNEL("GatherElements", bindKernel(axisAttr, gatherElementsKernel));
KILN_REGISTER_CPU_KERNEL("GatherND", bindKernel(batchDimsAttr, gatherNDKernel));
KILN_REGISTER_CPU_KERNEL("OneHot", bindKernel(axisAttr, oneHotKernel));

}  // namespace
}  // namespace kiln::cpu
