// CPU kernels of the Reduce* family: each is a fold (pre-map, combine, init) over the reduced
// elements followed by a final map of the accumulator and the element count.
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/reduce_runs.h"
#include "backends/cpu/kernels/reduce_simd.h"
#include "ir/ops/reduce_axes.h"

namespace kiln::cpu {
namespace {

// What ir::planReduce reads of the node (op, opset, keepdims, axes, noop_with_empty_axes),
// kept when the kernel is made: the plan depends on each run's rank and axes input.
ir::Node reduceAttrs(const ir::Node& node) {
  return nodeLabelWithAttrs(node, {"keepdims", "axes", "noop_with_empty_axes"});
}

ir::ReducePlan planFor(KernelContext& ctx, const ir::Node& node) {
  std::optional<std::vector<int64_t>> axes;
  if (ir::reduceTakesAxesInput(node) && ctx.hasInput(1)) axes = ctx.input(1).toInt64Vector();
  return ir::planReduce(node, static_cast<int64_t>(ctx.input(0).rank()), axes);
}

int64_t reducedCount(const Shape& shape, const ir::ReducePlan& plan) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) n *= plan.reduced[d] ? shape[d] : 1;
  return n;
}

/// Folds a run of n inputs into one value, on 8-wide lanes so the loop vectorizes.
template <typename Acc, typename T, typename Fold>
Acc foldRun(const T* x, int64_t n, const Fold& fold) {
  int64_t j = 0;
  Acc result = fold.init();
  if constexpr (std::is_same_v<T, float>) {
    Float8 lanes = splat(fold.init());
    for (; j + 8 <= n; j += 8) lanes = fold.combine(lanes, fold.pre(load8(x + j)));
    for (int l = 0; l < 8; ++l) result = fold.combine(result, lanes[l]);
  } else {
    constexpr int kLanes = 8;
    Acc lanes[kLanes];
    for (Acc& l : lanes) l = fold.init();
    for (; j + kLanes <= n; j += kLanes) {
      for (int l = 0; l < kLanes; ++l)
        lanes[l] = fold.combine(lanes[l], fold.pre(static_cast<Acc>(x[j + l])));
    }
    for (Acc l : lanes) result = fold.combine(result, l);
  }
  for (; j < n; ++j) result = fold.combine(result, fold.pre(static_cast<Acc>(x[j])));
  return result;
}

/// acc[j] = combine(acc[j], pre(x[j])) for a run of n inputs that each fold into their own output.
template <typename Acc, typename T, typename Fold>
void foldEach(const T* x, Acc* acc, int64_t n, const Fold& fold) {
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; j + 8 <= n; j += 8)
      store8(acc + j, fold.combine(load8(acc + j), fold.pre(load8(x + j))));
  }
  for (; j < n; ++j) acc[j] = fold.combine(acc[j], fold.pre(static_cast<Acc>(x[j])));
}

// Folds: init() is the value of an empty reduction; pre() maps each input; combine() is
// associative. pre and combine also take Float8 vectors (comparisons there yield lane masks).

template <typename Acc>
struct SumFold {
  static Acc init() { return Acc(0); }
  template <typename V>
  static V pre(V x) {
    return x;
  }
  template <typename V>
  static V combine(V a, V b) {
    return a + b;
  }
};

template <typename Acc>
struct AbsSumFold : SumFold<Acc> {
  template <typename V>
  static V pre(V x) {
    if constexpr (std::is_unsigned_v<Acc>)
      return x;
    else
      return x < V{} ? -x : x;
  }
};

template <typename Acc>
struct SquareSumFold : SumFold<Acc> {
  template <typename V>
  static V pre(V x) {
    return x * x;
  }
};

template <typename Acc>
struct ProdFold {
  static Acc init() { return Acc(1); }
  template <typename V>
  static V pre(V x) {
    return x;
  }
  template <typename V>
  static V combine(V a, V b) {
    return a * b;
  }
};

// Max and Min propagate NaN like numpy (b != b only holds for NaN).
template <typename Acc>
struct MaxFold {
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity)
      return -std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::lowest();
  }
  template <typename V>
  static V pre(V x) {
    return x;
  }
  template <typename V>
  static V combine(V a, V b) {
    return ((b > a) | (b != b)) ? b : a;
  }
};

template <typename Acc>
struct MinFold {
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity)
      return std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::max();
  }
  template <typename V>
  static V pre(V x) {
    return x;
  }
  template <typename V>
  static V combine(V a, V b) {
    return ((b < a) | (b != b)) ? b : a;
  }
};

/// Folds x into one accumulator per output element.
template <typename T, typename Fold>
std::vector<ReduceAccType<T>> foldInto(const Tensor& x, const ir::ReducePlan& plan,
                                       int64_t outCount, const Fold& fold) {
  using Acc = ReduceAccType<T>;
  std::vector<Acc> acc(static_cast<size_t>(outCount), fold.init());
  const T* px = x.data<T>();
  forEachReductionRun(x.shape(), plan.reduced,
                      [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
                        const T* run = px + in;
                        if (reducedRun) {
                          acc[out] = fold.combine(acc[out], foldRun<Acc>(run, n, fold));
                        } else {
                          foldEach(run, acc.data() + out, n, fold);
                        }
                      });
  return acc;
}

/// Stores finish(acc, count) for each output; integer results of a float-valued finish truncate.
template <typename T, typename Acc, typename Finish>
void store(const std::vector<Acc>& acc, int64_t count, Tensor& y, Finish finish) {
  T* py = y.data<T>();
  for (size_t o = 0; o < acc.size(); ++o) py[o] = static_cast<T>(finish(acc[o], count));
}

template <template <typename> class Fold, typename Finish>
void runReduce(KernelContext& ctx, const ir::Node& attrs, bool allowInteger, Finish finish) {
  const Tensor& x = ctx.input(0);
  const ir::ReducePlan plan = planFor(ctx, attrs);
  Tensor& y = ctx.output(0);
  const int64_t count = reducedCount(x.shape(), plan);
  auto body = [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = ReduceAccType<T>;
    store<T>(foldInto<T>(x, plan, y.numel(), Fold<Acc>{}), count, y, finish);
  };
  if (allowInteger) {
    dispatchNumeric(x.dtype(), attrs.opType.c_str(), body);
  } else {
    dispatchFloat(x.dtype(), attrs.opType.c_str(), body);
  }
}

const auto identity = [](auto acc, int64_t) { return acc; };

template <template <typename> class Fold>
KernelFactory reduceKernel() {
  return bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
    runReduce<Fold>(ctx, attrs, true, identity);
  });
}

// Max and Min also take bool (opset 20): any / all.
template <template <typename> class Fold>
KernelFactory minMaxKernel() {
  return bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DataType::kBool) {
      runReduce<Fold>(ctx, attrs, true, identity);
      return;
    }
    const ir::ReducePlan plan = planFor(ctx, attrs);
    Tensor& y = ctx.output(0);
    store<bool>(foldInto<bool>(x, plan, y.numel(), Fold<uint8_t>{}), 0, y, identity);
  });
}

const KernelFactory meanKernel =
    bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
      runReduce<SumFold>(ctx, attrs, true, [](auto sum, int64_t count) {
        using Acc = decltype(sum);
        if constexpr (std::is_integral_v<Acc>)
          return count == 0 ? Acc(0) : static_cast<Acc>(sum / static_cast<Acc>(count));
        else
          return sum / static_cast<Acc>(count);
      });
    });

const KernelFactory l2Kernel =
    bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
      runReduce<SquareSumFold>(
          ctx, attrs, true, [](auto sum, int64_t) { return std::sqrt(static_cast<double>(sum)); });
    });

const KernelFactory logSumKernel =
    bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
      runReduce<SumFold>(ctx, attrs, false, [](auto sum, int64_t) { return std::log(sum); });
    });

// log(sum(exp(x))) computed as max + log(sum(exp(x - max))) so large inputs do not overflow.
const KernelFactory logSumExpKernel =
    bindKernel(reduceAttrs, [](KernelContext& ctx, const ir::Node& attrs) {
      const Tensor& x = ctx.input(0);
      const ir::ReducePlan plan = planFor(ctx, attrs);
      Tensor& y = ctx.output(0);
      dispatchFloat(x.dtype(), "ReduceLogSumExp", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using Acc = ReduceAccType<T>;
        const std::vector<Acc> maxes = foldInto<T>(x, plan, y.numel(), MaxFold<Acc>{});
        // An all -inf (or empty) slice keeps its max as the result; shift such slices by 0.
        std::vector<Acc> shift(maxes);
        for (Acc& s : shift) s = std::isfinite(s) ? s : Acc(0);
        std::vector<Acc> sums(maxes.size(), Acc(0));
        const T* px = x.data<T>();
        forEachReductionRun(
            x.shape(), plan.reduced, [&](int64_t in, int64_t out, int64_t n, bool reducedRun) {
              const T* run = px + in;
              if (reducedRun) {
                Acc s = 0;
                for (int64_t j = 0; j < n; ++j)
                  s += std::exp(static_cast<Acc>(run[j]) - shift[out]);
                sums[out] += s;
              } else {
                for (int64_t j = 0; j < n; ++j)
                  sums[out + j] += std::exp(static_cast<Acc>(run[j]) - shift[out + j]);
              }
            });
        T* py = y.data<T>();
        for (size_t o = 0; o < sums.size(); ++o) {
          py[o] = static_cast<T>(std::isfinite(maxes[o]) ? shift[o] + std::log(sums[o]) : maxes[o]);
        }
      });
    });

KILN_REGISTER_CPU_KERNEL("ReduceSum", reduceKernel<SumFold>());
KILN_REGISTER_CPU_KERNEL("ReduceL1", reduceKernel<AbsSumFold>());
KILN_REGISTER_CPU_KERNEL("ReduceSumSquare", reduceKernel<SquareSumFold>());
KILN_REGISTER_CPU_KERNEL("ReduceProd", reduceKernel<ProdFold>());
KILN_REGISTER_CPU_KERNEL("ReduceMax", minMaxKernel<MaxFold>());
KILN_REGISTER_CPU_KERNEL("ReduceMin", minMaxKernel<MinFold>());
KILN_REGISTER_CPU_KERNEL("ReduceMean", meanKernel);
KILN_REGISTER_CPU_KERNEL("ReduceL2", l2Kernel);
KILN_REGISTER_CPU_KERNEL("ReduceLogSum", logSumKernel);
KILN_REGISTER_CPU_KERNEL("ReduceLogSumExp", logSumExpKernel);

}  // namespace
}  // namespace kiln::cpu
