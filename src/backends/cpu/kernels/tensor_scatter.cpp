// CPU kernel of TensorScatter (opset 24): a KV-cache update that writes `update` along an axis
// at each batch's write index (mode linear), or wrapping around the cache (mode circular).
#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

struct TensorScatterAttrs {
  bool circular = false;
  int64_t axis = -2;
};

TensorScatterAttrs tensorScatterAttrs(const ir::Node& node) {
  return {ir::attrString(node, "mode", "linear") == "circular", ir::attrInt(node, "axis", -2)};
}

void tensorScatterKernel(KernelContext& ctx, const TensorScatterAttrs& attrs) {
  const Tensor& cache = ctx.input(0);
  const Tensor& update = ctx.input(1);
  const bool circular = attrs.circular;
  const auto rank = static_cast<int64_t>(cache.rank());
  if (rank < 2 || static_cast<int64_t>(update.rank()) != rank) {
    ctx.fail("past_cache " + cache.describe() + " and update " + update.describe() +
                 " need the same rank >= 2",
             ErrorCode::kInvalidArgument);
  }
  const auto axis = static_cast<size_t>(normalizeAxis(ctx, attrs.axis, rank));
  if (axis == 0) ctx.fail("axis must not be the batch axis", ErrorCode::kInvalidModel);
  for (size_t d = 0; d < cache.rank(); ++d) {
    if (d != axis ? update.dim(d) != cache.dim(d) : update.dim(d) > cache.dim(d)) {
      ctx.fail("update " + update.describe() + " does not fit past_cache " + cache.describe(),
               ErrorCode::kInvalidArgument);
    }
  }
  const int64_t batches = cache.dim(0);
  std::vector<int64_t> writeAt(static_cast<size_t>(batches), 0);
  if (ctx.hasInput(2)) {
    writeAt = ctx.input(2).toInt64Vector();
    if (static_cast<int64_t>(writeAt.size()) != batches)
      ctx.fail("write_indices must hold one index per batch", ErrorCode::kInvalidArgument);
  }
  const int64_t maxLength = cache.dim(axis), length = update.dim(axis);
  // Rows of `inner` elements along the axis; `middle` rows per batch come before the axis.
  const int64_t inner = dimProduct(cache.shape(), axis + 1, cache.rank());
  const int64_t middle = dimProduct(cache.shape(), 1, axis);
  Tensor& y = ctx.output(0);
  dispatchStorage(cache.dtype(), "TensorScatter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = cache.data<T>();
    T* out = y.data<T>();
    std::copy(src, src + cache.numel(), out);
    const T* up = update.data<T>();
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t m = 0; m < middle; ++m) {
        for (int64_t s = 0; s < length; ++s) {
          int64_t at = writeAt[b] + s;
          if (circular) at = ((at % maxLength) + maxLength) % maxLength;
          if (at < 0 || at >= maxLength) {
            ctx.fail("write index " + std::to_string(at) + " is outside the cache length " +
                         std::to_string(maxLength),
                     ErrorCode::kInvalidArgument);
          }
          const T* from = up + ((b * middle + m) * length + s) * inner;
          std::copy(from, from + inner, out + ((b * middle + m) * maxLength + at) * inner);
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("TensorScatter", bindKernel(tensorScatterAttrs, tensorScatterKernel));

}  // namespace
}  // namespace kiln::cpu
