// Per-tensor 8-bit quantization as the QLinear* kernels read it (scale and zero-point inputs side
// by side), and the tensor-wide conversions of the ops that compute in float between a
// DequantizeLinear and a QuantizeLinear (com.microsoft QLinearAveragePool, QLinearSoftmax, ...).
#pragma once
#include "backends/cpu/kernels/qlinear_binary_run.h"
#include "backends/cpu/kernels/qlinear_integer.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {

/// One per-tensor quantization: DequantizeLinear's and QuantizeLinear's formulas.
struct Quantization {
  double scale = 1.0, zeroPoint = 0.0;

  float dequantize(double q) const { return static_cast<float>((q - zeroPoint) * scale); }
  FloatQuantization inFloat() const {
    return {static_cast<float>(scale), static_cast<float>(zeroPoint)};
  }
  template <typename Q>
  Q quantize(float x) const {
    return roundAndSaturate<Q>(roundTo<float>(static_cast<double>(x) / scale), zeroPoint);
  }
};

/// The quantization whose scale is input `scale` and zero point (omitted: 0) input scale + 1.
inline Quantization quantizationAt(const KernelContext& ctx, size_t scale, const char* scaleName,
                                   const char* zeroPointName) {
  const double zeroPoint =
      ctx.hasInput(scale + 1) ? qlinearParams(ctx, scale + 1, zeroPointName, 1)[0] : 0.0;
  return {roundTo<float>(qlinearParams(ctx, scale, scaleName, 1)[0]), zeroPoint};
}

/// Calls fn(const A*) with the data of an int8 or uint8 input.
template <typename Fn>
void withEightBit(const Tensor& t, const char* what, Fn&& fn) {
  if (t.dtype() == DataType::kInt8) return fn(t.data<int8_t>());
  if (t.dtype() != DataType::kUint8) throwUnsupportedType(t.dtype(), what);
  fn(t.data<uint8_t>());
}

/// x (int8 or uint8) dequantized into a float32 tensor of its shape.
Tensor dequantizeTensor(const Tensor& x, const Quantization& q, const char* what);
/// x (float32) quantized into a tensor of `dtype` (int8 or uint8) of its shape.
Tensor quantizeTensor(const Tensor& x, const Quantization& q, DataType dtype, const char* what);

}  // namespace kiln::cpu
