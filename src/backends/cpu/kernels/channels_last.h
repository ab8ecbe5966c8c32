// Moving the channel axis of a tensor [N, C, D1, ..., Dk] to the end ([N, D1, ..., Dk, C]) and
// back: what the reference paths of channels-last ops (com.microsoft NhwcMaxPool, kiln::QConv and
// QLinearGlobalAveragePool with channels_last = 1) wrap around their channels-first kernels.
#pragma once
#include "kiln/tensor.h"

namespace kiln::cpu {

/// [N, C, D...] -> [N, D..., C] and its inverse (shapes of rank < 2 unchanged).
Shape channelsLastShape(const Shape& channelsFirst);
Shape channelsFirstShape(const Shape& channelsLast);

/// The tensor with its channel axis moved (any dtype of fixed-size elements; rank >= 2).
Tensor toChannelsLast(const Tensor& channelsFirst);
Tensor toChannelsFirst(const Tensor& channelsLast);

}  // namespace kiln::cpu
