// CPU kernel of com.microsoft VarlenCausalConvWithState: request b's tokens
// [cu[b], cu[b + 1]) of the token-major input are one causal convolution per channel
// (causal_conv_core.h) over [initial_state[b], tokens], which never reads across requests; the
// window's last (k - 1) * dilation steps are final_state[b]. state_update[b] keeps the request's
// first min(capture_count[b], capacity, length) tokens (the values appended to the state), zeros
// after them.
#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/causal_conv_core.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

struct VarlenAttrs {
  int64_t dilation = 1;
  bool silu = false;
  int64_t capacity = 0;  // state_update_capacity
};

VarlenAttrs varlenAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "dilation", 1), ir::attrString(node, "activation", "none") != "none",
          ir::attrInt(node, "state_update_capacity", 0)};
}

std::string dims(std::initializer_list<int64_t> values) { return shapeToString(Shape(values)); }

// Request b's token range [starts[b], starts[b + 1]), checked: from 0 to total, never backwards.
std::vector<int64_t> requestStarts(const KernelContext& ctx, const Tensor& cu, int64_t total) {
  if (cu.rank() != 1 || cu.numel() < 1) {
    ctx.fail("cumulative_sequence_length must be (batch + 1), got " + cu.describe(),
             ErrorCode::kInvalidArgument);
  }
  const int32_t* v = cu.data<int32_t>();
  std::vector<int64_t> starts(v, v + cu.numel());
  if (starts.front() != 0 || starts.back() != total) {
    ctx.fail("cumulative_sequence_length must start at 0 and end at total_tokens " +
                 std::to_string(total) + ", got " + std::to_string(starts.front()) + " .. " +
                 std::to_string(starts.back()),
             ErrorCode::kInvalidArgument);
  }
  for (size_t b = 1; b < starts.size(); ++b) {
    if (starts[b] < starts[b - 1]) {
      ctx.fail("cumulative_sequence_length must not decrease, got " +
                   std::to_string(starts[b - 1]) + " then " + std::to_string(starts[b]) + " at " +
                   std::to_string(b),
               ErrorCode::kInvalidArgument);
    }
  }
  return starts;
}

void varlenCausalConvKernel(KernelContext& ctx, const VarlenAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor& initial = ctx.input(4);
  const Tensor* capture = ctx.hasInput(5) ? &ctx.input(5) : nullptr;
  if (x.rank() != 2)
    ctx.fail("input must be (total_tokens, channels), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t total = x.dim(0), channels = x.dim(1);
  if (w.rank() != 3 || w.dim(0) != channels || w.dim(1) != 1 || w.dim(2) < 1) {
    ctx.fail("weight " + w.describe() + " must be (" + std::to_string(channels) + ", 1, k)",
             ErrorCode::kInvalidArgument);
  }
  const CausalConvShape shape{w.dim(2), attrs.dilation, attrs.silu};
  if (shape.dilation < 1 || shape.k - 1 > std::numeric_limits<int64_t>::max() / shape.dilation)
    ctx.fail("dilation must be >= 1 and the state length (k - 1) * dilation within int64",
             ErrorCode::kInvalidArgument);
  const int64_t state = shape.state();
  const std::vector<int64_t> starts = requestStarts(ctx, ctx.input(2), total);
  const int64_t batch = static_cast<int64_t>(starts.size()) - 1;
  if (bias && bias->shape() != Shape{channels})
    ctx.fail("bias must hold one value per channel", ErrorCode::kInvalidArgument);
  if (initial.shape() != Shape{batch, channels, state}) {
    ctx.fail("initial_state " + initial.describe() + " must be " + dims({batch, channels, state}),
             ErrorCode::kInvalidArgument);
  }
  if (capture && capture->shape() != Shape{batch}) {
    ctx.fail("capture_count " + capture->describe() + " must be " + dims({batch}),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.allocateOutput(0, x.dtype(), x.shape());
  Tensor& final = ctx.allocateOutput(1, x.dtype(), initial.shape());
  Tensor* update = ctx.wantsOutput(2)
                       ? &ctx.allocateOutput(2, x.dtype(), {batch, attrs.capacity, channels})
                       : nullptr;
  dispatchFloat(x.dtype(), "VarlenCausalConvWithState", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<ComputeType<T>> window;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t start = starts[b], length = starts[b + 1] - start;
      for (int64_t c = 0; c < channels; ++c) {
        CausalConvRow<T> row;
        row.past = initial.data<T>() + (b * channels + c) * state;
        row.input = x.data<T>() + start * channels + c;
        row.inputStride = channels;
        row.length = length;
        row.output = y.data<T>() + start * channels + c;
        row.outputStride = channels;
        row.present = final.data<T>() + (b * channels + c) * state;
        causalConvRow(shape, row, w.data<T>() + c * shape.k, bias ? bias->data<T>() + c : nullptr,
                      window);
      }
      if (!update || attrs.capacity == 0) continue;
      T* slots = update->data<T>() + b * attrs.capacity * channels;
      std::fill(slots, slots + attrs.capacity * channels, T(0));
      const int64_t wanted = capture ? capture->data<int32_t>()[b] : 0;
      const int64_t kept = std::clamp<int64_t>(wanted, 0, std::min(attrs.capacity, length));
      std::memcpy(slots, x.data<T>() + start * channels,
                  static_cast<size_t>(kept * channels) * sizeof(T));
    }
  });
}

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "VarlenCausalConvWithState",
                                bindKernel(varlenAttrs, varlenCausalConvKernel));

}  // namespace
}  // namespace kiln::cpu
