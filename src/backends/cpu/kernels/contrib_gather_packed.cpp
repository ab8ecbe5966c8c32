// CPU kernel of com.microsoft GatherPacked (ir/ops/contrib_gather_packed.cpp): each index's row
// of the GGML block-packed table decoded to float32 (ggml_block_decode.h), then rounded once to
// the output type. An index that is negative or past the vocabulary reads row 0, as onnxruntime
// does; an empty vocabulary with indices to gather fails. The shape rule checked data's row
// bytes against K, so each row holds exactly K / block size blocks.
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/ggml_block_decode.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {
namespace {

struct GatherPackedAttrs {
  ir::GgmlType format;
  int64_t k;
};

void gatherPacked(KernelContext& ctx, const GatherPackedAttrs& a) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t vocab = data.dim(0), rowBytes = data.dim(1), count = indices.numel();
  if (vocab == 0 && count > 0) {
    ctx.fail("data has no rows to gather for indices " + indices.describe(),
             ErrorCode::kInvalidArgument);
  }
  Tensor& out = ctx.output(0);
  dispatchFloat(out.dtype(), "GatherPacked output", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    const uint8_t* table = data.data<uint8_t>();
    parallelForAtLeast(count, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> row(std::is_same_v<T, float> ? 0 : static_cast<size_t>(a.k));
      for (int64_t n = begin; n < end; ++n) {
        int64_t r = indices.intAt(n);
        if (r < 0 || r >= vocab) r = 0;
        const uint8_t* src = table + r * rowBytes;
        if constexpr (std::is_same_v<T, float>) {
          decodeGgmlRow(a.format, src, a.k, dst + n * a.k);
        } else {
          decodeGgmlRow(a.format, src, a.k, row.data());
          for (int64_t i = 0; i < a.k; ++i) dst[n * a.k + i] = static_cast<T>(row[i]);
        }
      }
    });
  });
}

KernelFn makeGatherPackedKernel(const KernelCreateInfo& info) {
  GatherPackedAttrs a{static_cast<ir::GgmlType>(ir::attrInt(info.node, "packed_type")),
                      ir::attrInt(info.node, "K")};
  return [a](KernelContext& ctx) { gatherPacked(ctx, a); };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatherPacked",
                                KernelFactory(makeGatherPackedKernel));

}  // namespace kiln::cpu
