// CPU kernels of ops that rearrange or combine tensors: Transpose, Concat, Split, Tile,
// DepthToSpace, SpaceToDepth, Trilu, ReverseSequence. All work on every dtype.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/shape_rules.h"

namespace kiln::cpu {
namespace {

// Transpose keeps "perm" for ir::transposePerm, which checks it against each run's rank.
ir::Node transposeAttrs(const ir::Node& node) { return nodeLabelWithAttrs(node, {"perm"}); }

void transposeKernel(KernelContext& ctx, const ir::Node& attrs) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<int64_t> perm = ir::transposePerm(attrs, x.rank());
  std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  std::vector<int64_t> strides;
  for (int64_t p : perm) strides.push_back(inStrides[p]);
  copyStridedTensor(x, 0, strides, y, "Transpose");
}

// Concat's axis (required from opset 4, 1 by default before).
int64_t concatAxis(const ir::Node& node) {
  return node.opset < 4 ? ir::attrInt(node, "axis", 1) : ir::attrInt(node, "axis");
}

void concatKernel(KernelContext& ctx, int64_t axisAttr) {
  Tensor& y = ctx.output(0);
  const int64_t axis = normalizeAxis(ctx, axisAttr, static_cast<int64_t>(y.rank()));
  const int64_t outer = dimProduct(y.shape(), 0, axis);
  const int64_t inner = dimProduct(y.shape(), axis + 1, y.rank());
  const int64_t outRow = y.dim(axis) * inner;
  dispatchStorage(y.dtype(), "Concat", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y.data<T>();
    // Each input's block of an output row: source, column where it starts, length.
    struct Block {
      const T* in;
      int64_t column;
      int64_t row;
    };
    std::vector<Block> blocks;
    int64_t column = 0;
    for (size_t k = 0; k < ctx.numInputs(); ++k) {
      const Tensor& x = ctx.input(k);
      const int64_t row = x.rank() > static_cast<size_t>(axis) ? x.dim(axis) * inner : 0;
      if (row > 0) blocks.push_back({x.data<T>(), column, row});
      column += row;
    }
    if (outer > 1) {  // threads take contiguous ranges of output rows
      parallelForAtLeast(
          outer, std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, outRow)),
          [&](int64_t o0, int64_t o1) {
            for (int64_t o = o0; o < o1; ++o)
              for (const Block& b : blocks)
                std::copy(b.in + o * b.row, b.in + (o + 1) * b.row, out + o * outRow + b.column);
          });
      return;
    }
    // One output row (batch-1 channel concat): split the output into equal element ranges and
    // copy the parts of the input blocks that fall into each.
    parallelForAtLeast(outRow, kMinElementsPerThread, [&](int64_t e0, int64_t e1) {
      for (const Block& b : blocks) {
        const int64_t lo = std::max(e0, b.column), hi = std::min(e1, b.column + b.row);
        if (lo < hi) std::copy(b.in + (lo - b.column), b.in + (hi - b.column), out + lo);
      }
    });
  });
}

struct SplitAttrs {
  ir::Node label;  // with num_outputs, for ir::splitSizes
  int64_t axis = 0;
  bool splitIsInput = false;                  // opset 13 on: sizes in input 1, else the attribute
  std::optional<std::vector<int64_t>> split;  // the attribute, before opset 13
};

SplitAttrs splitAttrs(const ir::Node& node) {
  SplitAttrs a;
  a.label = nodeLabelWithAttrs(node, {"num_outputs"});
  a.axis = ir::attrInt(node, "axis", 0);
  a.splitIsInput = node.opset >= 13;
  if (!a.splitIsInput && ir::hasAttr(node, "split")) a.split = ir::attrInts(node, "split");
  return a;
}

void splitKernel(KernelContext& ctx, const SplitAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalizeAxis(ctx, attrs.axis, static_cast<int64_t>(x.rank()));
  std::optional<std::vector<int64_t>> split = attrs.split;
  if (attrs.splitIsInput && ctx.hasInput(1)) split = ctx.input(1).toInt64Vector();
  std::vector<int64_t> sizes = *ir::splitSizes(attrs.label, x.dim(axis), ctx.numOutputs(), split);
  const int64_t outer = dimProduct(x.shape(), 0, axis);
  const int64_t inner = dimProduct(x.shape(), axis + 1, x.rank());
  const int64_t inRow = x.dim(axis) * inner;
  dispatchStorage(x.dtype(), "Split", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    int64_t column = 0;
    for (size_t k = 0; k < ctx.numOutputs(); ++k) {
      const int64_t row = sizes[k] * inner;
      if (ctx.wantsOutput(k)) {
        T* out = ctx.output(k).data<T>();
        for (int64_t o = 0; o < outer; ++o)
          std::copy(in + o * inRow + column, in + o * inRow + column + row, out + o * row);
      }
      column += row;
    }
  });
}

// Tile reads the input as the view [r0, d0, r1, d1, ...] with stride 0 along each repeat.
void tileKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::vector<int64_t> repeats = ctx.input(1).toInt64Vector();
  std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  Shape view;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < x.rank(); ++d) {
    view.insert(view.end(), {repeats[d], x.dim(d)});
    strides.insert(strides.end(), {0, inStrides[d]});
  }
  dispatchStorage(x.dtype(), "Tile", [&](auto tag) {
    using T = typename decltype(tag)::type;
    copyStrided(x.data<T>(), view, strides, y.data<T>());
  });
}

// Both ops are a transpose of a 6-D view of the NCHW input.
struct BlockAttrs {
  std::string opType;
  int64_t blocksize = 1;
  bool crd = false;
};

BlockAttrs blockAttrs(const ir::Node& node) {
  // "mode" exists from opset 11 (DepthToSpace) and 25 (SpaceToDepth); DCR is the default.
  return {node.opType, ir::attrInt(node, "blocksize"),
          ir::attrString(node, "mode", "DCR") == "CRD"};
}

void blockRearrange(KernelContext& ctx, const BlockAttrs& attrs, bool toSpace) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t b = attrs.blocksize;
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Shape view;
  std::vector<int64_t> perm;
  const bool crd = attrs.crd;
  if (!toSpace) {
    view = {n, c, h / b, b, w / b, b};
    perm = crd ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4};
  } else if (crd) {
    view = {n, c / (b * b), b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    view = {n, b, b, c / (b * b), h, w};
    perm = {0, 3, 4, 1, 5, 2};
  }
  std::vector<int64_t> viewStrides = contiguousStrides(view);
  Shape outView;
  std::vector<int64_t> strides;
  for (int64_t p : perm) {
    outView.push_back(view[p]);
    strides.push_back(viewStrides[p]);
  }
  dispatchStorage(x.dtype(), attrs.opType.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    copyStrided(x.data<T>(), outView, strides, y.data<T>());
  });
}

void triluKernel(KernelContext& ctx, bool upper) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    if (ctx.input(1).numel() != 1) ctx.fail("k must be a scalar, got " + ctx.input(1).describe());
    k = ctx.input(1).toInt64Vector()[0];
  }
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  dispatchStorage(x.dtype(), "Trilu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = (m * rows + r) * cols;
        // Kept columns: c >= r + k (upper) or c <= r + k (lower); the rest stay zero.
        const int64_t begin = upper ? std::clamp<int64_t>(r + k, 0, cols) : 0;
        const int64_t end = upper ? cols : std::clamp<int64_t>(r + k + 1, 0, cols);
        std::copy(in + base + begin, in + base + end, out + base + begin);
      }
    }
  });
}

void reverseSequenceKernel(KernelContext& ctx, bool timeFirst) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t steps = x.dim(timeFirst ? 0 : 1);
  const int64_t batch = x.dim(timeFirst ? 1 : 0);
  const int64_t inner = dimProduct(x.shape(), 2, x.rank());
  std::vector<int64_t> lens = indexValues(ctx, ctx.input(1));
  if (static_cast<int64_t>(lens.size()) != batch) {
    ctx.fail("sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " +
                 std::to_string(batch),
             ErrorCode::kInvalidArgument);
  }
  auto offset = [&](int64_t t, int64_t b) {
    return (timeFirst ? t * batch + b : b * steps + t) * inner;
  };
  dispatchStorage(x.dtype(), "ReverseSequence", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens[b];
      if (len < 0 || len > steps) {
        ctx.fail("sequence length " + std::to_string(len) + " is out of range [0, " +
                     std::to_string(steps) + "]",
                 ErrorCode::kInvalidArgument);
      }
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t source = t < len ? len - 1 - t : t;
        std::copy(in + offset(source, b), in + offset(source, b) + inner, out + offset(t, b));
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Transpose", bindKernel(transposeAttrs, transposeKernel));
KILN_REGISTER_CPU_KERNEL("Concat", bindKernel(concatAxis, concatKernel));
KILN_REGISTER_CPU_KERNEL("Split", bindKernel(splitAttrs, splitKernel));
KILN_REGISTER_CPU_KERNEL("Tile", tileKernel);
KILN_REGISTER_CPU_KERNEL("DepthToSpace",
                         bindKernel(blockAttrs, [](KernelContext& ctx, const BlockAttrs& attrs) {
                           blockRearrange(ctx, attrs, true);
                         }));
KILN_REGISTER_CPU_KERNEL("SpaceToDepth",
                         bindKernel(blockAttrs, [](KernelContext& ctx, const BlockAttrs& attrs) {
                           blockRearrange(ctx, attrs, false);
                         }));
KILN_REGISTER_CPU_KERNEL(
    "Trilu", bindKernel([](const ir::Node& node) { return ir::attrInt(node, "upper", 1) != 0; },
                        triluKernel));
KILN_REGISTER_CPU_KERNEL(
    "ReverseSequence",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "time_axis", 0) == 0; },
               reverseSequenceKernel));

}  // namespace
}  // namespace kiln::cpu
