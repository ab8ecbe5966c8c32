// DynamicQuantizeLinear's uint8 quantization (a scale and zero point chosen from the data's range
// widened to include 0), shared by its kernel and by the com.microsoft ops that quantize their
// float activations the same way at run time (DynamicQuantizeMatMul, DynamicQuantizeLSTM).
#pragma once
#include <cstdint>

namespace kiln::cpu {

struct DynamicUint8 {
  float scale = 1.0f;
  uint8_t zeroPoint = 0;
};

/// The parameters DynamicQuantizeLinear (and ONNX Runtime's dynamic quantization) picks for x[0,
/// n).
DynamicUint8 chooseDynamicUint8(const float* x, int64_t n);
/// out[i] = saturate(round_half_even(x[i] / scale) + zero point).
void quantizeDynamicUint8(const float* x, int64_t n, const DynamicUint8& q, uint8_t* out);

}  // namespace kiln::cpu
