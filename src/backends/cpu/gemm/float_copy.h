// float16/bfloat16 tensors are multiplied through float copies: the GEMM kernels work in float.
#pragma once
#include "core/dtype_dispatch.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// True for the 16-bit float types that are computed through a float copy.
inline bool isHalfLike(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

/// A float32 copy of a float16/bfloat16 tensor.
inline Tensor toFloatCopy(const Tensor& t) {
  Tensor out(DataType::kFloat32, t.shape());
  float* dst = out.data<float>();
  const int64_t n = t.numel();
  if (t.dtype() == DataType::kFloat16) {
    const Half* src = t.data<Half>();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    const BFloat16* src = t.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
  return out;
}

/// Writes a float32 tensor into a float16/bfloat16 tensor of the same shape.
inline void storeFromFloat(const Tensor& src, Tensor& dst) {
  const float* s = src.data<float>();
  const int64_t n = src.numel();
  if (dst.dtype() == DataType::kFloat16) {
    Half* d = dst.data<Half>();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    BFloat16* d = dst.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

/// Calls fn(TypeTag<T>{}, x, w, bias, y) for float and double tensors, and for float16/bfloat16
/// through float copies (the result is rounded back into y). bias may be null.
template <typename Fn>
void runConvolutionInFloat(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                           const char* op, Fn&& fn) {
  switch (x.dtype()) {
    case DataType::kFloat32:
      return fn(TypeTag<float>{}, x, w, bias, y);
    case DataType::kFloat64:
      return fn(TypeTag<double>{}, x, w, bias, y);
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const Tensor fx = toFloatCopy(x), fw = toFloatCopy(w);
      const Tensor fb = bias ? toFloatCopy(*bias) : Tensor();
      Tensor fy(DataType::kFloat32, y.shape());
      fn(TypeTag<float>{}, fx, fw, bias ? &fb : nullptr, fy);
      storeFromFloat(fy, y);
      return;
    }
    default:
      throwUnsupportedType(x.dtype(), op);
  }
}

}  // namespace kiln::cpu
