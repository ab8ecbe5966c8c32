// CPU kernel of CausalConvWithState, ONNX opset 27 and com.microsoft (which adds dilation and the
// channels-last layout): each channel is convolved with its own k taps by the causal core
// (causal_conv_core.h) over [past_state (or zeros), input]; the last (k - 1) * dilation steps of
// that window become present_state.
#include <limits>

#include "backends/cpu/kernels/causal_conv_core.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

struct CausalConvAttrs {
  int64_t dilation = 1;
  bool silu = false;
  bool channelsLast = false;  // input (B, L, d_1..d_n), state (B, state, d_1..d_n)
};

CausalConvAttrs onnxAttrs(const ir::Node& node) {
  return {1, ir::attrString(node, "activation", "none") != "none", false};
}

CausalConvAttrs microsoftAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "dilation", 1), ir::attrString(node, "activation", "none") != "none",
          ir::attrInt(node, "channels_last", 0) == 1};
}

// Where step t of channel c of batch b lies in a dense (B, C, steps) or (B, steps, C) tensor.
struct StepLayout {
  int64_t batchStride, channelStride, stepStride;
  StepLayout(bool channelsLast, int64_t channels, int64_t steps)
      : batchStride(channels * steps),
        channelStride(channelsLast ? 1 : steps),
        stepStride(channelsLast ? channels : 1) {}
  int64_t offset(int64_t b, int64_t c) const { return b * batchStride + c * channelStride; }
};

void causalConvWithStateKernel(KernelContext& ctx, const CausalConvAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const Tensor* past = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  if (attrs.channelsLast ? x.rank() < 3 : x.rank() != 3) {
    ctx.fail(
        std::string("input must be ") +
            (attrs.channelsLast ? "(batch, length, channels...)" : "(batch, channels, length)") +
            ", got " + x.describe(),
        ErrorCode::kInvalidArgument);
  }
  const int64_t batches = x.dim(0);
  const int64_t length = attrs.channelsLast ? x.dim(1) : x.dim(2);
  int64_t channels = x.dim(1);
  if (attrs.channelsLast) {
    // The trailing axes are the channels; checked, since a zero batch or length lets them be any
    // size.
    channels = 1;
    for (size_t d = 2; d < x.rank(); ++d) {
      if (__builtin_mul_overflow(channels, x.dim(d), &channels))
        ctx.fail("input's channel count is past int64", ErrorCode::kInvalidArgument);
    }
  }
  if (w.rank() != 3 || w.dim(0) != channels || w.dim(1) != 1 || w.dim(2) < 1) {
    ctx.fail("weight " + w.describe() + " must be (" + std::to_string(channels) + ", 1, k)",
             ErrorCode::kInvalidArgument);
  }
  CausalConvShape shape{w.dim(2), attrs.dilation, attrs.silu};
  if (shape.dilation < 1 || shape.k - 1 > std::numeric_limits<int64_t>::max() / shape.dilation) {
    ctx.fail("dilation must be >= 1 and the state length (k - 1) * dilation within int64",
             ErrorCode::kInvalidArgument);
  }
  const int64_t state = shape.state();
  if (bias && bias->shape() != Shape{channels})
    ctx.fail("bias must hold one value per channel", ErrorCode::kInvalidArgument);
  Shape stateShape = x.shape();
  if (attrs.channelsLast)
    stateShape[1] = state;
  else
    stateShape[2] = state;
  if (past && past->shape() != stateShape) {
    ctx.fail("past_state " + past->describe() + " must be " + shapeToString(stateShape),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.allocateOutput(0, x.dtype(), x.shape());
  Tensor& present = ctx.allocateOutput(1, x.dtype(), stateShape);
  if (batches == 0 || channels == 0) return;  // no row; the layouts' strides may not fit
  const StepLayout act(attrs.channelsLast, channels, length);
  const StepLayout hist(attrs.channelsLast, channels, state);
  dispatchFloat(x.dtype(), "CausalConvWithState", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<ComputeType<T>> window;
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t c = 0; c < channels; ++c) {
        CausalConvRow<T> row;
        row.past = past ? past->data<T>() + hist.offset(b, c) : nullptr;
        row.pastStride = hist.stepStride;
        row.input = x.data<T>() + act.offset(b, c);
        row.inputStride = act.stepStride;
        row.length = length;
        row.output = y.data<T>() + act.offset(b, c);
        row.outputStride = act.stepStride;
        row.present = present.data<T>() + hist.offset(b, c);
        row.presentStride = hist.stepStride;
        causalConvRow(shape, row, w.data<T>() + c * shape.k, bias ? bias->data<T>() + c : nullptr,
                      window);
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("CausalConvWithState", bindKernel(onnxAttrs, causalConvWithStateKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "CausalConvWithState",
                                bindKernel(microsoftAttrs, causalConvWithStateKernel));

}  // namespace
}  // namespace kiln::cpu
