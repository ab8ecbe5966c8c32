// CPU kernel of CausalConvWithState: each channel is convolved with its own k taps over
// [past_state (or k - 1 zeros), input], so output step t sees inputs t - k + 1 .. t; the last
// k - 1 steps of that sequence become present_state. Optional SiLU (x * sigmoid(x)) on the output.
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

void causalConvWithStateKernel(KernelContext& ctx, bool silu) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const Tensor* past = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  if (x.rank() != 3)
    ctx.fail("input must be (batch, channels, length), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t batches = x.dim(0), channels = x.dim(1), length = x.dim(2);
  if (w.rank() != 3 || w.dim(0) != channels || w.dim(1) != 1 || w.dim(2) < 1) {
    ctx.fail("weight " + w.describe() + " must be (" + std::to_string(channels) + ", 1, k)",
             ErrorCode::kInvalidArgument);
  }
  const int64_t k = w.dim(2), state = k - 1;
  if (bias && bias->numel() != channels)
    ctx.fail("bias must hold one value per channel", ErrorCode::kInvalidArgument);
  if (past && past->shape() != Shape{batches, channels, state}) {
    ctx.fail("past_state " + past->describe() + " must be (" + std::to_string(batches) + ", " +
                 std::to_string(channels) + ", " + std::to_string(state) + ")",
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.allocateOutput(0, x.dtype(), x.shape());
  Tensor* present =
      ctx.wantsOutput(1) ? &ctx.allocateOutput(1, x.dtype(), {batches, channels, state}) : nullptr;
  dispatchFloat(x.dtype(), "CausalConvWithState", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<C> padded(static_cast<size_t>(state + length));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t row = b * channels + c;
        for (int64_t i = 0; i < state; ++i)
          padded[i] = past ? static_cast<C>(past->data<T>()[row * state + i]) : C(0);
        for (int64_t t = 0; t < length; ++t)
          padded[state + t] = static_cast<C>(x.data<T>()[row * length + t]);
        const T* taps = w.data<T>() + c * k;
        for (int64_t t = 0; t < length; ++t) {
          C sum = bias ? static_cast<C>(bias->data<T>()[c]) : C(0);
          for (int64_t j = 0; j < k; ++j) sum += static_cast<C>(taps[j]) * padded[t + j];
          if (silu) {
            sum = static_cast<C>(
                static_cast<T>(sum));  // the activation sees the convolution's rounded output
            sum = sum / (C(1) + std::exp(-sum));
          }
          y.data<T>()[row * length + t] = static_cast<T>(sum);
        }
        if (present) {
          for (int64_t i = 0; i < state; ++i)
            present->data<T>()[row * state + i] = static_cast<T>(padded[length + i]);
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("CausalConvWithState", bindKernel(
                                                    [](const ir::Node& node) {
                                                      return ir::attrString(node, "activation",
                                                                            "none") != "none";
                                                    },
                                                    causalConvWithStateKernel));

}  // namespace
}  // namespace kiln::cpu
