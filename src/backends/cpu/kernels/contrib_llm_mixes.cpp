// CPU kernels of com.microsoft HyperConnectionPreMix and HyperConnectionPostMix (shape rules in
// ir/ops/contrib_llm_mixes.cpp, layouts in ir/ops/hyper_connection_shapes.h): float32 sums over
// the streams, rounded once to the streams' type, as onnxruntime computes them; the gates are read
// as doubles (tensorToDoubles) and used as the float32 values they hold.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/norm_util.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/hyper_connection_shapes.h"

namespace kiln::cpu {
namespace {

ir::StreamShape streamsOf(const KernelContext& ctx, int64_t numBranches) {
  ir::StreamShape p;
  const std::string error = ir::resolveStreams(ctx.input(0).shape(), numBranches, p);
  if (!error.empty()) ctx.fail(error, ErrorCode::kInvalidArgument);
  return p;
}

ir::GateLayout gateOf(const KernelContext& ctx, const ir::StreamShape& p, size_t i,
                      bool allowFlatFeature) {
  ir::GateLayout layout;
  const std::string error =
      ir::resolveGate(ctx.input(i).shape(), ctx.input(0).shape(), p, allowFlatFeature, layout);
  if (!error.empty()) ctx.fail("gate " + ctx.input(i).describe() + " " + error);
  return layout;
}

struct PreMixAttrs {
  int64_t branches;
  float scale;
};

void preMixKernel(KernelContext& ctx, const PreMixAttrs& attrs) {
  const ir::StreamShape p = streamsOf(ctx, attrs.branches);
  const ir::GateLayout layout = gateOf(ctx, p, 1, true);
  const std::vector<double> gate = tensorToDoubles(ctx.input(1));
  Tensor& y = ctx.output(0);
  dispatchFloat(ctx.input(0).dtype(), "HyperConnectionPreMix", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = ctx.input(0).template data<T>();
    T* out = y.data<T>();
    parallelForAtLeast(p.rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        for (int64_t h = 0; h < p.hidden; ++h) {
          float sum = 0.0f;
          for (int64_t c = 0; c < p.branches; ++c) {
            const float v = static_cast<ComputeType<T>>(x[(row * p.branches + c) * p.hidden + h]);
            sum += v * static_cast<float>(gate[ir::gateOffset(layout, row, c, h, p)]);
          }
          out[row * p.hidden + h] = static_cast<T>(sum * attrs.scale);
        }
      }
    });
  });
}

void postMixKernel(KernelContext& ctx, int64_t numBranches) {
  const ir::StreamShape p = streamsOf(ctx, numBranches);
  const ir::GateLayout layout = gateOf(ctx, p, 2, false);
  const std::vector<double> gate = tensorToDoubles(ctx.input(2));
  const std::vector<double> mix =
      ctx.hasInput(3) ? tensorToDoubles(ctx.input(3)) : std::vector<double>{};
  if (ctx.input(1).numel() != p.rows * p.hidden ||
      (ctx.hasInput(3) && static_cast<int64_t>(mix.size()) != p.rows * p.branches * p.branches)) {
    ctx.fail("block_output " + ctx.input(1).describe() + " or stream_mix does not fit streams " +
                 ctx.input(0).describe(),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  dispatchFloat(ctx.input(0).dtype(), "HyperConnectionPostMix", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* x = ctx.input(0).template data<T>();
    const T* block = ctx.input(1).template data<T>();
    T* out = y.data<T>();
    parallelForAtLeast(p.rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const T* xr = x + row * p.branches * p.hidden;
        for (int64_t k = 0; k < p.branches; ++k) {
          for (int64_t h = 0; h < p.hidden; ++h) {
            float v = 0.0f;
            if (mix.empty()) {
              v = static_cast<float>(static_cast<C>(xr[k * p.hidden + h]));
            } else {
              for (int64_t c = 0; c < p.branches; ++c) {
                v += static_cast<float>(mix[(row * p.branches + c) * p.branches + k]) *
                     static_cast<float>(static_cast<C>(xr[c * p.hidden + h]));
              }
            }
            v += static_cast<float>(gate[ir::gateOffset(layout, row, k, h, p)]) *
                 static_cast<float>(static_cast<C>(block[row * p.hidden + h]));
            out[(row * p.branches + k) * p.hidden + h] = static_cast<T>(v);
          }
        }
      }
    });
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "HyperConnectionPreMix",
                                bindKernel(
                                    [](const ir::Node& node) {
                                      return PreMixAttrs{
                                          ir::attrInt(node, "num_branches", 0),
                                          ir::attrFloat(node, "reduction_scale", 1.0f)};
                                    },
                                    preMixKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN(
    "com.microsoft", "HyperConnectionPostMix",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "num_branches", 0); },
               postMixKernel));

}  // namespace kiln::cpu
