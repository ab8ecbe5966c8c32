// CPU kernels normalizing by statistics of blocks of the input: LayerNormalization and
// RMSNormalization (trailing dims), InstanceNormalization (each channel) and GroupNormalization
// (groups of channels).
#include "backends/cpu/kernels/norm_util.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

// Scale or bias (of any float type) broadcast to the normalized shape, in compute type C.
template <typename C>
std::vector<C> expandParam(const KernelContext& ctx, const std::string& opType, const Tensor& t,
                           const Shape& target) {
  Tensor expanded = t;
  if (t.shape() != target) {
    if (broadcastShapes(ctx, t.shape(), target) != target) {
      ctx.fail("cannot broadcast " + shapeToString(t.shape()) + " to " + shapeToString(target),
               ErrorCode::kInvalidArgument);
    }
    expanded = Tensor(t.dtype(), target);
    dispatchFloat(t.dtype(), opType.c_str(), [&](auto tag) {
      using P = typename decltype(tag)::type;
      mapBinary<P, P>(t, Tensor(t.dtype(), target), expanded, [](auto a, auto) { return a; });
    });
  }
  std::vector<C> v(static_cast<size_t>(expanded.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<C>(expanded.doubleAt(static_cast<int64_t>(i)));
  return v;
}

// Which statistics a layer norm writes as outputs 1 and 2.
enum class NormStatsOutputs { kMeanThenInvStd, kInvStdOnly };

void storeStats(KernelContext& ctx, NormStatsOutputs stats, const std::vector<double>& means,
                const std::vector<double>& invStds) {
  const bool invStdOnly = stats == NormStatsOutputs::kInvStdOnly;
  if (ctx.wantsOutput(1)) storeDoubles(ctx.output(1), invStdOnly ? invStds : means);
  if (!invStdOnly && ctx.wantsOutput(2)) storeDoubles(ctx.output(2), invStds);
}

// X of type T normalized over its trailing dims into Y of type O (RMSNormalization's Y has the
// scale's type; LayerNormalization's has X's).
template <typename T, typename O>
void layerNorm(KernelContext& ctx, const std::string& opType, int64_t axis, double epsilon,
               bool rms, NormStatsOutputs stats) {
  using C = ComputeType<T>;
  const Tensor& x = ctx.input(0);
  const Shape normShape(x.shape().begin() + axis, x.shape().end());
  const int64_t len = shapeNumel(normShape);
  const int64_t rows = len == 0 ? 0 : x.numel() / len;
  if (x.numel() == 0) {  // nothing to normalize, however long the normalized dims
    ctx.output(0);
    storeStats(ctx, stats, {}, {});
    return;
  }
  std::vector<C> scale = expandParam<C>(ctx, opType, ctx.input(1), normShape);
  std::vector<C> bias = ctx.hasInput(2) ? expandParam<C>(ctx, opType, ctx.input(2), normShape)
                                        : std::vector<C>(len, C(0));
  Tensor& y = ctx.output(0);
  std::vector<double> means(static_cast<size_t>(rows)), invStds(static_cast<size_t>(rows));
  if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float>) {
    // float32 (transformers): vectorized rows, split over the thread pool.
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    auto normalizeRows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const RowStats s = layerNormRowFloat(src + r * len, dst + r * len, len, scale.data(),
                                             bias.data(), epsilon, rms);
        means[static_cast<size_t>(r)] = s.mean;
        invStds[static_cast<size_t>(r)] = s.invStd;
      }
    };
    constexpr int64_t kParallelElements =
        1 << 14;  // below this, waking the pool costs more than it saves
    if (x.numel() >= kParallelElements) {
      parallelFor(rows, normalizeRows);
    } else {
      normalizeRows(0, rows);
    }
    storeStats(ctx, stats, means, invStds);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = x.data<T>() + r * len;
    O* dst = y.data<O>() + r * len;
    const RowStats s = rms ? rmsStats(src, len, epsilon) : rowStats(src, len, epsilon);
    const C mean = static_cast<C>(s.mean);
    const C inv = static_cast<C>(s.invStd);
    for (int64_t i = 0; i < len; ++i)
      dst[i] = static_cast<O>((C(src[i]) - mean) * inv * scale[i] + bias[i]);
    means[static_cast<size_t>(r)] = s.mean;
    invStds[static_cast<size_t>(r)] = s.invStd;
  }
  storeStats(ctx, stats, means, invStds);
}

KernelFn makeLayerNorm(const KernelCreateInfo& info) {
  const int64_t axisAttr = ir::attrInt(info.node, "axis", -1);
  const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-5f);
  // com.microsoft's SimplifiedLayerNormalization (in the ONNX domain) is RMSNormalization with
  // the inverse standard deviation as its only statistics output.
  const bool simplified = info.node.opType == "SimplifiedLayerNormalization";
  const bool rms = simplified || info.node.opType == "RMSNormalization";
  const NormStatsOutputs stats =
      simplified ? NormStatsOutputs::kInvStdOnly : NormStatsOutputs::kMeanThenInvStd;
  return [opType = info.node.opType, axisAttr, epsilon, rms, stats](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t axis = normalizeAxis(ctx, axisAttr, static_cast<int64_t>(x.rank()));
    const Tensor& y = ctx.output(0);
    if (y.dtype() == x.dtype()) {
      dispatchFloat(x.dtype(), opType.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        layerNorm<T, T>(ctx, opType, axis, epsilon, rms, stats);
      });
      return;
    }
    dispatchFloat(x.dtype(), opType.c_str(), [&](auto inTag) {
      dispatchFloat(y.dtype(), opType.c_str(), [&](auto outTag) {
        layerNorm<typename decltype(inTag)::type, typename decltype(outTag)::type>(
            ctx, opType, axis, epsilon, rms, stats);
      });
    });
  };
}

// x viewed as [N, groups, channelsPerGroup, spatial]; scale and bias hold one value per channel.
template <typename T>
void groupNorm(const Tensor& x, Tensor& y, int64_t groups, const std::vector<double>& scale,
               const std::vector<double>& bias, double epsilon) {
  const int64_t n = x.dim(0);
  const int64_t channels = x.dim(1);
  const int64_t perGroup = channels / groups;
  if (x.numel() == 0) return;  // else 2^40 empty channels would take 2^40 steps
  const int64_t spatial = x.numel() / (n * channels);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = (b * channels + g * perGroup) * spatial;
      const RowStats s = rowStats(x.data<T>() + base, perGroup * spatial, epsilon);
      for (int64_t c = 0; c < perGroup; ++c) {
        const size_t channel = static_cast<size_t>(g * perGroup + c);
        const double a = s.invStd * scale[channel];
        const int64_t offset = base + c * spatial;
        affineRun(x.data<T>() + offset, y.data<T>() + offset, spatial, a,
                  bias[channel] - s.mean * a);
      }
    }
  }
}

// Per-group parameters (GroupNormalization-18) repeated for each channel of the group.
std::vector<double> perChannel(const KernelContext& ctx, std::vector<double> v, int64_t channels,
                               int64_t groups) {
  if (static_cast<int64_t>(v.size()) == channels) return v;
  if (static_cast<int64_t>(v.size()) != groups) {
    ctx.fail("scale and bias must have one value per channel or per group",
             ErrorCode::kInvalidArgument);
  }
  std::vector<double> out;
  for (int64_t c = 0; c < channels; ++c)
    out.push_back(v[static_cast<size_t>(c / (channels / groups))]);
  return out;
}

KernelFn makeGroupNorm(const KernelCreateInfo& info) {
  const bool instance = info.node.opType == "InstanceNormalization";
  const int64_t groupsAttr = instance ? 0 : ir::attrInt(info.node, "num_groups");
  const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-5f);
  return [opType = info.node.opType, instance, groupsAttr, epsilon](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const int64_t channels = x.dim(1);
    const int64_t groups = instance ? channels : groupsAttr;
    if (groups < 1 || channels % groups != 0) {
      ctx.fail("num_groups " + std::to_string(groups) + " does not divide " +
                   std::to_string(channels) + " channels",
               ErrorCode::kInvalidArgument);
    }
    std::vector<double> scale = perChannel(ctx, tensorToDoubles(ctx.input(1)), channels, groups);
    std::vector<double> bias = perChannel(ctx, tensorToDoubles(ctx.input(2)), channels, groups);
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), opType.c_str(), [&](auto tag) {
      groupNorm<typename decltype(tag)::type>(x, y, groups, scale, bias, epsilon);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("LayerNormalization", KernelFactory(makeLayerNorm));
KILN_REGISTER_CPU_KERNEL("RMSNormalization", KernelFactory(makeLayerNorm));
KILN_REGISTER_CPU_KERNEL("SimplifiedLayerNormalization", KernelFactory(makeLayerNorm));
KILN_REGISTER_CPU_KERNEL("InstanceNormalization", KernelFactory(makeGroupNorm));
KILN_REGISTER_CPU_KERNEL("GroupNormalization", KernelFactory(makeGroupNorm));

}  // namespace
}  // namespace kiln::cpu
