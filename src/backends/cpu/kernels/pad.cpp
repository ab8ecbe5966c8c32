// CPU kernel of Pad (constant, reflect, edge and wrap modes; negative pads crop), every dtype.
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/ops/shape_rules.h"

namespace kiln::cpu {
namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

PadMode padMode(const ir::Node& node) {
  std::string mode = ir::attrString(node, "mode", "constant");
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "wrap" && node.opset >= 19) return PadMode::kWrap;
  ir::failNode(node, "unsupported mode '" + mode + "'", ErrorCode::kUnsupportedNode);
}

struct PadAttrs {
  ir::Node label;  // padAmounts names the node when the pads do not fit the rank
  PadMode mode = PadMode::kConstant;
  bool fromAttributes = false;  // opset < 11: pads and value are attributes, not inputs
  std::vector<int64_t> pads;
  float value = 0.0f;
};

PadAttrs padAttrs(const ir::Node& node) {
  PadAttrs a;
  a.label = nodeLabel(node);
  a.mode = padMode(node);
  a.fromAttributes = node.opset < 11;
  if (a.fromAttributes) {
    a.pads = ir::attrInts(node, "pads");
    a.value = ir::attrFloat(node, "value", 0.0f);
  }
  return a;
}

// For each output position along one axis, the input position it reads, or -1 for the pad value.
std::vector<int64_t> sourceIndices(const KernelContext& ctx, PadMode mode, int64_t inDim,
                                   int64_t outDim, int64_t before) {
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
Tensor padValue(const KernelContext& ctx, const PadAttrs& attrs, DataType dtype) {
  if (!attrs.fromAttributes && ctx.hasInput(2) && ctx.input(2).numel() > 0) {
    if (ctx.input(2).dtype() != dtype) ctx.fail("constant_value's type differs from the data's");
    return ctx.input(2);
  }
  Tensor value(dtype, {});
  if (attrs.fromAttributes && dtype != DataType::kString) {
    const float v = attrs.value;
    dispatchNumericOrBool(dtype, "Pad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      value.data<T>()[0] = static_cast<T>(v);
    });
  }
  return value;
}

void padKernel(KernelContext& ctx, const PadAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  const PadMode mode = attrs.mode;
  std::vector<int64_t> amounts;
  if (attrs.fromAttributes) {
    amounts = ir::padAmounts(attrs.label, rank, attrs.pads, std::nullopt);
  } else {
    std::optional<std::vector<int64_t>> axes;
    if (ctx.hasInput(3)) axes = ctx.input(3).toInt64Vector();
    amounts = ir::padAmounts(attrs.label, rank, ctx.input(1).toInt64Vector(), axes);
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  std::vector<std::vector<int64_t>> maps;
  for (size_t d = 0; d < rank; ++d)
    maps.push_back(sourceIndices(ctx, mode, x.dim(d), y.dim(d), amounts[d]));
  const Tensor value = padValue(ctx, attrs, x.dtype());
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

KILN_REGISTER_CPU_KERNEL("Pad", bindKernel(padAttrs, padKernel));

}  // namespace
}  // namespace kiln::cpu
