// CPU kernels of com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization
// (ir/ops/contrib_transformer.cpp), float32: each row s = input + skip + bias (skip repeated over
// the batch when it has fewer rows) normalized by the LayerNormalization row kernel
// (layerNormRowFloat, norm_util.h), RMS statistics for the simplified op.
#include <vector>

#include "backends/cpu/kernels/norm_util.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

struct SkipNormInputs {
  size_t beta, bias;  // kAbsent where the op has no such input
};
constexpr size_t kAbsent = 1000;

// A 1-D parameter with one value per column, or `fallback` (zeros) when omitted.
const float* columnParam(const KernelContext& ctx, size_t input, const char* name, int64_t columns,
                         const std::vector<float>& fallback) {
  if (!ctx.hasInput(input)) return fallback.data();
  const Tensor& t = ctx.input(input);
  if (t.numel() != columns || t.rank() != 1) {
    ctx.fail(std::string(name) + " must be 1-D with " + std::to_string(columns) + " values (the hidden size), got " +
                 t.describe(),
             ErrorCode::kInvalidArgument);
  }
  return t.data<float>();
}

void skipLayerNorm(KernelContext& ctx, const SkipNormInputs& in, double epsilon, bool rms) {
  const Tensor& x = ctx.input(0);
  const Tensor& skip = ctx.input(1);
  const int64_t hidden = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
  const int64_t skipRows = hidden == 0 ? 0 : skip.numel() / hidden;
  const bool skipFits = skip.rank() >= 1 && skip.dim(skip.rank() - 1) == hidden && skipRows > 0 &&
                        (skip.numel() == x.numel() || (x.rank() == 3 && skip.numel() * x.dim(0) == x.numel()));
  if (!skipFits) {
    ctx.fail("skip " + skip.describe() + " must have the input's shape " + x.describe() + " or its last two dimensions",
             ErrorCode::kInvalidArgument);
  }
  const std::vector<float> zeros(static_cast<size_t>(hidden), 0.0f);
  const float* gamma = columnParam(ctx, 2, "gamma", hidden, zeros);
  const float* beta = in.beta == kAbsent ? zeros.data() : columnParam(ctx, in.beta, "beta", hidden, zeros);
  const float* bias = columnParam(ctx, in.bias, "bias", hidden, zeros);
  const float* src = x.data<float>();
  const float* add = skip.data<float>();
  float* y = ctx.output(0).data<float>();
  float* mean = ctx.wantsOutput(1) ? ctx.output(1).data<float>() : nullptr;
  float* invStd = ctx.wantsOutput(2) ? ctx.output(2).data<float>() : nullptr;
  float* sums = ctx.wantsOutput(3) ? ctx.output(3).data<float>() : nullptr;
  auto normalizeRows = [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(sums ? 0 : static_cast<size_t>(hidden));
    for (int64_t r = begin; r < end; ++r) {
      float* s = sums ? sums + r * hidden : scratch.data();
      const float* xr = src + r * hidden;
      const float* kr = add + (r % skipRows) * hidden;
      for (int64_t i = 0; i < hidden; ++i) s[i] = xr[i] + kr[i] + bias[i];
      const RowStats stats = layerNormRowFloat(s, y + r * hidden, hidden, gamma, beta, epsilon, rms);
      if (mean) mean[r] = static_cast<float>(stats.mean);
      if (invStd) invStd[r] = static_cast<float>(stats.invStd);
    }
  };
  constexpr int64_t kParallelElements = 1 << 14;  // below this, waking the pool costs more than it saves
  if (x.numel() >= kParallelElements) {
    parallelFor(rows, normalizeRows);
  } else {
    normalizeRows(0, rows);
  }
}

KernelFactory skipLayerNormFactory(SkipNormInputs inputs, bool rms) {
  return [inputs, rms](const KernelCreateInfo& info) -> KernelFn {
    const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-12f);
    return [inputs, rms, epsilon](KernelContext& ctx) { skipLayerNorm(ctx, inputs, epsilon, rms); };
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "SkipLayerNormalization", skipLayerNormFactory({3, 4}, false));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "SkipSimplifiedLayerNormalization",
                                skipLayerNormFactory({kAbsent, 3}, true));

}  // namespace kiln::cpu
