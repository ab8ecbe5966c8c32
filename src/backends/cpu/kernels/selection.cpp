// CPU kernels of ops whose output size depends on the data: NonZero, Compress, Unique.
// They allocate their outputs once the size is known.
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

void nonZeroKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> positions;
  dispatchNumericOrBool(x.dtype(), "NonZero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (static_cast<ComputeType<T>>(in[i]) != ComputeType<T>(0)) positions.push_back(i);
  });
  const int64_t count = static_cast<int64_t>(positions.size());
  const size_t rank = std::max<size_t>(x.rank(), 1);
  Tensor& y = ctx.allocateOutput(0, DataType::kInt64, {static_cast<int64_t>(rank), count});
  int64_t* out = y.data<int64_t>();
  const Shape dims = x.rank() ? x.shape() : Shape{1};
  for (int64_t j = 0; j < count; ++j) {
    int64_t flat = positions[j];
    for (size_t d = rank; d-- > 0;) {
      out[d * count + j] = flat % dims[d];
      flat /= dims[d];
    }
  }
}

// The "axis" attribute of Compress; none: the input flattened.
std::optional<int64_t> axisAttr(const ir::Node& node) { return optionalAttrInt(node, "axis"); }

void compressKernel(KernelContext& ctx, const std::optional<int64_t>& axisAttr) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  const bool hasAxis = axisAttr.has_value();
  const int64_t axis = hasAxis ? normalizeAxis(ctx, *axisAttr, static_cast<int64_t>(x.rank())) : 0;
  const Shape shape = hasAxis ? x.shape() : Shape{x.numel()};
  const int64_t axisDim = shape[axis];
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!cond.data<bool>()[i]) continue;
    if (i >= axisDim)
      ctx.fail("condition selects index " + std::to_string(i) + " past the axis size " +
                   std::to_string(axisDim),
               ErrorCode::kInvalidArgument);
    selected.push_back(i);
  }
  Shape outShape = shape;
  outShape[axis] = static_cast<int64_t>(selected.size());
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  const int64_t outer = dimProduct(shape, 0, axis);
  const int64_t inner = dimProduct(shape, axis + 1, shape.size());
  dispatchStorage(x.dtype(), "Compress", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i : selected) {
        const T* src = in + (o * axisDim + i) * inner;
        out = std::copy(src, src + inner, out);
      }
  });
}

// Unique over "items": single elements (no axis) or slices along the axis, compared
// lexicographically.
struct UniqueAttrs {
  std::optional<int64_t> axis;  // none: the input flattened
  bool sorted = true;
};

UniqueAttrs uniqueAttrs(const ir::Node& node) {
  return {optionalAttrInt(node, "axis"), ir::attrInt(node, "sorted", 1) != 0};
}

void uniqueKernel(KernelContext& ctx, const UniqueAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const bool hasAxis = attrs.axis.has_value();
  const bool sorted = attrs.sorted;
  const int64_t axis =
      hasAxis ? normalizeAxis(ctx, *attrs.axis, static_cast<int64_t>(x.rank())) : 0;
  const Shape shape = hasAxis ? x.shape() : Shape{x.numel()};
  const int64_t outer = dimProduct(shape, 0, axis);
  const int64_t inner = dimProduct(shape, axis + 1, shape.size());
  const int64_t items = shape[axis];

  dispatchAll(x.dtype(), "Unique", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    // Lexicographic comparison of items a and b over (outer, inner). NaN sorts after every
    // number and equals NaN (numpy's unique), so that the order is strict and weak: with `<`
    // alone a NaN would equal everything and the sort's groups would be arbitrary.
    auto isNan = [](const T& v) {
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Half> ||
                    std::is_same_v<T, BFloat16>) {
        using C = ComputeType<T>;
        if constexpr (std::is_floating_point_v<C>) return std::isnan(static_cast<C>(v));
      }
      return false;
    };
    auto compare = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o) {
        const T* pa = in + (o * items + a) * inner;
        const T* pb = in + (o * items + b) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const bool nanA = isNan(pa[i]), nanB = isNan(pb[i]);
          if (nanA || nanB) {
            if (nanA != nanB) return nanA ? 1 : -1;
            continue;
          }
          if (pa[i] < pb[i]) return -1;
          if (pb[i] < pa[i]) return 1;
        }
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(items));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    // Groups of equal items in sorted order: first occurrence and count.
    std::vector<int64_t> firsts, counts, groupOf(static_cast<size_t>(items));
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || compare(order[i - 1], order[i]) != 0) {
        firsts.push_back(order[i]);
        counts.push_back(0);
      }
      ++counts.back();
      groupOf[order[i]] = static_cast<int64_t>(firsts.size() - 1);
    }
    // Output position of each group: sorted order, or order of first occurrence.
    const size_t unique = firsts.size();
    std::vector<int64_t> groups(unique);
    std::iota(groups.begin(), groups.end(), 0);
    if (!sorted)
      std::sort(groups.begin(), groups.end(),
                [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
    std::vector<int64_t> positionOf(unique);
    for (size_t p = 0; p < unique; ++p) positionOf[groups[p]] = static_cast<int64_t>(p);

    Shape outShape = shape;
    outShape[axis] = static_cast<int64_t>(unique);
    T* out = ctx.allocateOutput(0, x.dtype(), outShape).template data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g : groups) {
        const T* src = in + (o * items + firsts[g]) * inner;
        out = std::copy(src, src + inner, out);
      }
    auto writeInts = [&](size_t output, size_t n, auto valueAt) {
      if (!ctx.wantsOutput(output)) return;
      int64_t* p = ctx.allocateOutput(output, DataType::kInt64, {static_cast<int64_t>(n)})
                       .template data<int64_t>();
      for (size_t i = 0; i < n; ++i) p[i] = valueAt(i);
    };
    writeInts(1, unique, [&](size_t p) { return firsts[groups[p]]; });
    writeInts(2, static_cast<size_t>(items), [&](size_t i) { return positionOf[groupOf[i]]; });
    writeInts(3, unique, [&](size_t p) { return counts[groups[p]]; });
  });
}

KILN_REGISTER_CPU_KERNEL("NonZero", nonZeroKernel);
KILN_REGISTER_CPU_KERNEL("Compress", bindKernel(axisAttr, compressKernel));
KILN_REGISTER_CPU_KERNEL("Unique", bindKernel(uniqueAttrs, uniqueKernel));

}  // namespace
}  // namespace kiln::cpu
