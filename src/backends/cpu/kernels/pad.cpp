// CPU kernel of Pad (constant, reflect, edge and wrap modes; negative pads crop), every dtype.
#include "backends/cpu/kernels/copy_util.h"
#include "ir/ops/shape_rules.h"

namespace kiln::cpu {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

PadMode padMode(const KernelContext& ctx) {
  std::string mode = ir::attrString(ctx.node(), "mode", "constant");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "wrap" && ctx.node().opset >= 19) return PadMode::kWrap;
  ctx.fail("unsupported mode '" + mode + "'", ErrorCode::kUnsupportedNode);
}

// For each output position along one axis, the input position it reads, or -1 for the pad value.
std::vector<int64_t> sourceIndices(const KernelContext& ctx, PadMode mode, int64_t inDim, int64_t outDim, int64_t before) {
  std::vector<int64_t> map(static_cast<size_t>(outDim));
  for (int64_t o = 0; o < outDim; ++o) {
    int64_t i = o - before;
    if (i >= 0 && i < inDim) {
      map[o] = i;
      continue;
    }
    if (mode == PadMode::kConstant) {
      map[o] = -1;
      continue;
    }
    if (inDim == 0) ctx.fail("cannot pad an empty axis in this mode", ErrorCode::kInvalidArgument);
    if (mode == PadMode::kEdge) {
      map[o] = std::clamp<int64_t>(i, 0, inDim - 1);
    } else if (mode == PadMode::kWrap) {
      map[o] = ((i % inDim) + inDim) % inDim;
    } else if (inDim == 1) {
      map[o] = 0;
    } else {  // reflect without repeating the edge: period 2 * (inDim - 1)
      const int64_t period = 2 * (inDim - 1);
      int64_t m = ((i % period) + period) % period;
      map[o] = m < inDim ? m : period - m;
    }
  }
  return map;
}

// A one-element tensor of the data's dtype holding the constant pad value.
Tensor padValue(const KernelContext& ctx, DataType dtype) {
  const ir::Node& node = ctx.node();
  if (node.opset >= 11 && ctx.hasInput(2) && ctx.input(2).numel() > 0) {
    if (ctx.input(2).dtype() != dtype) ctx.fail("constant_value's type differs from the data's");
    return ctx.input(2);
  }
  Tensor value(dtype, {});
  if (node.opset < 11 && dtype != DataType::kString) {
    const float v = ir::attrFloat(node, "value", 0.0f);
    dispatchNumericOrBool(dtype, "Pad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      value.data<T>()[0] = static_cast<T>(v);
    });
  }
  return value;
}

void padKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ir::Node& node = ctx.node();
  const size_t rank = x.rank();
  const PadMode mode = padMode(ctx);
  std::vector<int64_t> amounts;
  if (node.opset < 11) {
    amounts = ir::padAmounts(node, rank, ir::attrInts(node, "pads"), std::nullopt);
  } else {
    std::optional<std::vector<int64_t>> axes;
    if (ctx.hasInput(3)) axes = ctx.input(3).toInt64Vector();
    amounts = ir::padAmounts(node, rank, ctx.input(1).toInt64Vector(), axes);
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < rank; ++d) maps.push_back(sourceIndices(ctx, mode, x.dim(d), y.dim(d), amounts[d]));
  const Tensor value = padValue(ctx, x.dtype());
  const std::vector<int64_t> strides = contiguousStrides(x.shape());

  dispatchStorage(x.dtype(), "Pad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T fill = value.data<T>()[0];
    if (rank == 0) {
      out[0] = in[0];
      return;
    }
    const std::vector<int64_t>& innerMap = maps[rank - 1];
    const int64_t inner = y.dim(rank - 1);
    const int64_t rows = y.numel() / inner;
    std::vector<int64_t> index(rank, 0);
    for (int64_t r = 0; r < rows; ++r, out += inner) {
      // The row's source offset, or -1 if an outer axis is in the constant padding.
      int64_t offset = 0;
      for (size_t d = 0; d + 1 < rank && offset >= 0; ++d) {
        const int64_t s = maps[d][index[d]];
        offset = s < 0 ? -1 : offset + s * strides[d];
      }
      if (offset < 0) {
        std::fill(out, out + inner, fill);
      } else {
        const T* row = in + offset;
        for (int64_t i = 0; i < inner; ++i) out[i] = innerMap[i] < 0 ? fill : row[innerMap[i]];
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++index[d] < y.dim(d)) break;
        index[d] = 0;
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Pad", padKernel);

}  // namespace
}  // namespace kiln::cpu
