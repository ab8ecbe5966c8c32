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

}  // namespace kiln::cpu
