// CPU kernel of DynamicQuantizeLinear: uint8 quantization of x with a scale and zero point chosen
// from x's range (widened to include 0), in float arithmetic as the ONNX spec writes it.
#include "backends/cpu/kernels/quantize_dynamic.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {

DynamicUint8 chooseDynamicUint8(const float* x, int64_t n) {
  float lo = 0.0f, hi = 0.0f;  // the range always includes 0, so that 0 is exactly representable
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  constexpr float kLevels = 255.0f;  // qmax - qmin for uint8
  // An all-zero x has no range: scale 1 (as ONNX Runtime does), so nothing divides by zero.
  const float scale = hi == lo ? 1.0f : (hi - lo) / kLevels;
  float initialZeroPoint = 0.0f - lo / scale;
  // An infinite x makes scale infinite and -lo / scale = inf / inf = NaN, which has no uint8
  // value: the zero point is then 0.
  if (std::isnan(initialZeroPoint)) initialZeroPoint = 0.0f;
  return {scale, static_cast<uint8_t>(std::nearbyint(std::clamp(initialZeroPoint, 0.0f, kLevels)))};
}

void quantizeDynamicUint8(const float* x, int64_t n, const DynamicUint8& q, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = roundAndSaturate<uint8_t>(x[i] / q.scale, q.zeroPoint);
}

namespace {

void dynamicQuantizeLinearKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const DynamicUint8 q = chooseDynamicUint8(x.data<float>(), x.numel());
  quantizeDynamicUint8(x.data<float>(), x.numel(), q, ctx.output(0).data<uint8_t>());
  if (ctx.wantsOutput(1)) ctx.output(1).data<float>()[0] = q.scale;
  if (ctx.wantsOutput(2)) ctx.output(2).data<uint8_t>()[0] = q.zeroPoint;
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("DynamicQuantizeLinear", KernelFn(dynamicQuantizeLinearKernel));

}  // namespace kiln::cpu
