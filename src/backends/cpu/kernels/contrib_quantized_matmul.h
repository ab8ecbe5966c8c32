// The float output stage of ONNX Runtime's dynamic-quantization products
// (contrib_quantized_matmul.cpp), shared with QAttention's projection.
#pragma once
#include "backends/cpu/kernels/qlinear_integer.h"

namespace kiln::cpu {

/// Where a product's float parameters b_scale and bias are (bias: an input index, maybe omitted).
struct FloatProductInputs {
  size_t bScale, bias;
};

/// y = float(product) * (aScale * b_scale[n]) + bias[n] over the rows of y (ONNX Runtime's
/// output stage: the multiplier in float32, then one multiply and one add); b_scale holds one
/// value or one per column n.
void scaleIntegerProduct(const KernelContext& ctx, const FloatProductInputs& in,
                         const Tensor& product, float aScale, Tensor& y);

}  // namespace kiln::cpu
