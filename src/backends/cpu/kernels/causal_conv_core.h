// The depthwise causal convolution of one channel shared by CausalConvWithState (ONNX opset 27
// and com.microsoft) and com.microsoft VarlenCausalConvWithState: the channel's window is
// [state (or zeros), input], with state = (k - 1) * dilation steps; output step t is
// bias + sum_j taps[j] * window[t + j * dilation], so its last tap is input step t; the window's
// last `state` steps are the new state. Each op only says where a channel's values lie (strides
// of its layout).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {

struct CausalConvShape {
  int64_t k = 1;         // taps per channel
  int64_t dilation = 1;  // spacing of the taps
  bool silu = false;     // activation silu / swish: x * sigmoid(x) on the output
  int64_t state() const { return (k - 1) * dilation; }
};

/// One channel's strided views. past == nullptr: zeros; present == nullptr: not wanted.
template <typename T>
struct CausalConvRow {
  const T* past = nullptr;
  int64_t pastStride = 1;
  const T* input = nullptr;
  int64_t inputStride = 1;
  int64_t length = 0;
  T* output = nullptr;
  int64_t outputStride = 1;
  T* present = nullptr;
  int64_t presentStride = 1;
};

/// Convolves one channel; `window` is scratch reused across calls.
template <typename T>
void causalConvRow(const CausalConvShape& shape, const CausalConvRow<T>& row, const T* taps,
                   const T* bias, std::vector<ComputeType<T>>& window) {
  using C = ComputeType<T>;
  const int64_t state = shape.state();
  window.resize(static_cast<size_t>(state + row.length));
  for (int64_t i = 0; i < state; ++i)
    window[i] = row.past ? static_cast<C>(row.past[i * row.pastStride]) : C(0);
  for (int64_t t = 0; t < row.length; ++t)
    window[state + t] = static_cast<C>(row.input[t * row.inputStride]);
  for (int64_t t = 0; t < row.length; ++t) {
    C sum = bias ? static_cast<C>(*bias) : C(0);
    for (int64_t j = 0; j < shape.k; ++j)
      sum += static_cast<C>(taps[j]) * window[t + j * shape.dilation];
    if (shape.silu) {
      sum = static_cast<C>(static_cast<T>(sum));  // the activation sees the rounded convolution
      sum = sum / (C(1) + std::exp(-sum));
    }
    row.output[t * row.outputStride] = static_cast<T>(sum);
  }
  if (row.present) {
    for (int64_t i = 0; i < state; ++i)
      row.present[i * row.presentStride] = static_cast<T>(window[row.length + i]);
  }
}

}  // namespace kiln::cpu
