// CPU kernels of the sequence ops (opset 11+). A sequence is a Tensor::sequence value: an
// immutable, shared list of tensors, so ops that change a sequence build a new list of the same
// tensors. Tensors put into a sequence are copied first: a node input may live in the memory arena,
// whose slot is reused after the input's last use while the sequence still holds it.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/run_checks.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

const std::vector<Tensor>& sequenceInput(KernelContext& ctx, size_t i) {
  const Tensor& t = ctx.input(i);
  if (!t.isSequence())
    ctx.fail("input " + std::to_string(i) + " must be a sequence, got " + t.describe());
  return t.sequenceItems();
}

// A position input resolved against a sequence of `count` items: negative counts from the end;
// valid positions are [-count, count - 1], or up to count itself where `allowEnd` (insertion).
size_t resolvePosition(KernelContext& ctx, size_t input, size_t count, bool allowEnd) {
  const Tensor& p = ctx.input(input);
  if (p.numel() != 1)
    ctx.fail("position must be a scalar, got " + p.describe(), ErrorCode::kInvalidArgument);
  const int64_t position = p.intAt(0);
  const auto n = static_cast<int64_t>(count);
  const int64_t last = allowEnd ? n : n - 1;
  if (position < -n || position > last) {
    ctx.fail("position " + std::to_string(position) + " is out of range for a sequence of " +
                 std::to_string(n) + " tensors (valid: " + std::to_string(-n) + " to " +
                 std::to_string(last) + ")",
             ErrorCode::kInvalidArgument);
  }
  return static_cast<size_t>(position < 0 ? position + n : position);
}

// Copies `rows` runs of `run` elements from src (stride srcStride) to dst (stride dstStride).
void copyRuns(DataType dtype, const Tensor& src, int64_t srcOffset, int64_t srcStride, Tensor& dst,
              int64_t dstOffset, int64_t dstStride, int64_t rows, int64_t run) {
  if (rows <= 0 || run <= 0) return;
  dispatchStorage(dtype, "sequence copy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(src.raw());
    T* d = static_cast<T*>(dst.raw());
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(s + srcOffset + r * srcStride, run, d + dstOffset + r * dstStride);
  });
}

DataType sequenceEmptyDtype(const ir::Node& node) {
  return static_cast<DataType>(
      ir::attrInt(node, "dtype", static_cast<int64_t>(DataType::kFloat32)));
}

void sequenceEmptyKernel(KernelContext& ctx, DataType dtype) {
  ctx.setOutput(0, Tensor::sequence(dtype, {}));
}

void sequenceConstructKernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.numInputs(); ++i) items.push_back(ctx.input(i).clone());
  ctx.setOutput(0, Tensor::sequence(ctx.input(0).dtype(), std::move(items)));
}

void sequenceInsertKernel(KernelContext& ctx) {
  std::vector<Tensor> items = sequenceInput(ctx, 0);
  const size_t at = ctx.hasInput(2) ? resolvePosition(ctx, 2, items.size(), true) : items.size();
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), ctx.input(1).clone());
  ctx.setOutput(0, Tensor::sequence(ctx.input(0).dtype(), std::move(items)));
}

void sequenceEraseKernel(KernelContext& ctx) {
  std::vector<Tensor> items = sequenceInput(ctx, 0);
  if (items.empty()) ctx.fail("cannot erase from an empty sequence", ErrorCode::kInvalidArgument);
  const size_t at =
      ctx.hasInput(1) ? resolvePosition(ctx, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
  ctx.setOutput(0, Tensor::sequence(ctx.input(0).dtype(), std::move(items)));
}

void sequenceAtKernel(KernelContext& ctx) {
  const std::vector<Tensor>& items = sequenceInput(ctx, 0);
  ctx.setOutput(0, items[resolvePosition(ctx, 1, items.size(), false)]);
}

void sequenceLengthKernel(KernelContext& ctx) {
  const auto n = static_cast<int64_t>(sequenceInput(ctx, 0).size());
  ctx.setOutput(0, Tensor::fromVector<int64_t>(DataType::kInt64, {}, {n}));
}

// Chunk lengths along the split axis: from the split input (a scalar chunk size, the last chunk
// taking the remainder, or one length per chunk), else chunks of 1.
std::vector<int64_t> splitLengths(KernelContext& ctx, int64_t extent) {
  if (!ctx.hasInput(1)) return std::vector<int64_t>(static_cast<size_t>(extent), 1);
  const Tensor& split = ctx.input(1);
  const std::vector<int64_t> values = split.toInt64Vector();
  std::vector<int64_t> lengths;
  if (split.rank() == 0) {
    const int64_t size = values[0];
    if (size <= 0)
      ctx.fail("split size must be positive, got " + std::to_string(size),
               ErrorCode::kInvalidArgument);
    for (int64_t start = 0; start < extent; start += size)
      lengths.push_back(std::min(size, extent - start));
    return lengths;
  }
  if (split.rank() != 1)
    ctx.fail("split must be a scalar or 1-D, got " + split.describe(), ErrorCode::kInvalidArgument);
  int64_t total = 0;
  for (int64_t v : values) {
    if (v < 0)
      ctx.fail("split lengths must not be negative, got " + std::to_string(v),
               ErrorCode::kInvalidArgument);
    total += v;
  }
  if (total != extent) {
    ctx.fail("split lengths sum to " + std::to_string(total) + " but the axis has " +
                 std::to_string(extent) + " elements",
             ErrorCode::kInvalidArgument);
  }
  return values;
}

struct SplitToSequenceAttrs {
  int64_t axis = 0;
  bool keepdims = true;
};

SplitToSequenceAttrs splitToSequenceAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "axis", 0), ir::attrInt(node, "keepdims", 1) != 0};
}

void splitToSequenceKernel(KernelContext& ctx, const SplitToSequenceAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail("cannot split a scalar", ErrorCode::kInvalidArgument);
  const auto axis =
      static_cast<size_t>(normalizeAxis(ctx, attrs.axis, static_cast<int64_t>(x.rank())));
  // keepdims applies only without a split input: each chunk then has length 1 on the axis.
  const bool squeeze = !ctx.hasInput(1) && !attrs.keepdims;
  const AxisBlocks b = axisBlocks(x.shape(), axis);
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t length : splitLengths(ctx, b.extent)) {
    Shape shape = x.shape();
    shape[axis] = length;
    Tensor chunk(x.dtype(), shape);
    copyRuns(x.dtype(), x, start * b.inner, b.extent * b.inner, chunk, 0, length * b.inner, b.outer,
             length * b.inner);
    if (squeeze) {
      shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
      chunk = chunk.reshaped(shape);
    }
    items.push_back(std::move(chunk));
    start += length;
  }
  ctx.setOutput(0, Tensor::sequence(x.dtype(), std::move(items)));
}

struct ConcatFromSequenceAttrs {
  int64_t axis = 0;
  bool newAxis = false;
};

ConcatFromSequenceAttrs concatFromSequenceAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "axis"), ir::attrInt(node, "new_axis", 0) != 0};
}

void concatFromSequenceKernel(KernelContext& ctx, const ConcatFromSequenceAttrs& attrs) {
  const std::vector<Tensor>& items = sequenceInput(ctx, 0);
  if (items.empty()) ctx.fail("cannot concatenate an empty sequence", ErrorCode::kInvalidArgument);
  const bool newAxis = attrs.newAxis;
  const Shape& first = items[0].shape();
  // With new_axis the items are stacked: the output has one more dim, and axis may be rank.
  const auto rank = static_cast<int64_t>(first.size()) + (newAxis ? 1 : 0);
  if (rank == 0)
    ctx.fail("cannot concatenate scalars without new_axis", ErrorCode::kInvalidArgument);
  const auto axis = static_cast<size_t>(normalizeAxis(ctx, attrs.axis, rank));
  Shape outShape = first;
  if (newAxis) outShape.insert(outShape.begin() + static_cast<std::ptrdiff_t>(axis), 0);
  outShape[axis] = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    Shape s = items[i].shape();
    if (newAxis) s.insert(s.begin() + static_cast<std::ptrdiff_t>(axis), 1);
    bool matches = s.size() == outShape.size();
    for (size_t d = 0; matches && d < s.size(); ++d) matches = d == axis || s[d] == outShape[d];
    if (!matches) {
      ctx.fail("sequence item " + std::to_string(i) + " is " + items[i].describe() +
                   ", item 0 is " + items[0].describe() + ": shapes must match except along axis " +
                   std::to_string(axis),
               ErrorCode::kInvalidArgument);
    }
    outShape[axis] += s[axis];
  }
  Tensor& y = ctx.allocateOutput(0, items[0].dtype(), outShape);
  const AxisBlocks out = axisBlocks(outShape, axis);
  int64_t offset = 0;  // along the axis
  for (const Tensor& item : items) {
    const int64_t extent = newAxis ? 1 : item.dim(axis);
    copyRuns(y.dtype(), item, 0, extent * out.inner, y, offset * out.inner, out.extent * out.inner,
             out.outer, extent * out.inner);
    offset += extent;
  }
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("SequenceEmpty", bindKernel(sequenceEmptyDtype, sequenceEmptyKernel));
KILN_REGISTER_CPU_KERNEL("SequenceConstruct", sequenceConstructKernel);
KILN_REGISTER_CPU_KERNEL("SequenceInsert", sequenceInsertKernel);
KILN_REGISTER_CPU_KERNEL("SequenceErase", sequenceEraseKernel);
KILN_REGISTER_CPU_KERNEL("SequenceAt", sequenceAtKernel);
KILN_REGISTER_CPU_KERNEL("SequenceLength", sequenceLengthKernel);
KILN_REGISTER_CPU_KERNEL("SplitToSequence",
                         bindKernel(splitToSequenceAttrs, splitToSequenceKernel));
KILN_REGISTER_CPU_KERNEL("ConcatFromSequence",
                         bindKernel(concatFromSequenceAttrs, concatFromSequenceKernel));

}  // namespace kiln::cpu
