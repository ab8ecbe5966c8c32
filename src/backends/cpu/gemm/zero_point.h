// Integer GEMM operands (MatMulInteger, ConvInteger): 8-bit tensors widened to int32 with their
// zero points subtracted, so the products are computed by the int32 GEMM.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/tensor.h"

namespace kiln::cpu {

/// int32(t[i]) - zeroPoint[(i / inner) % count], where zeroPoint has `count` values (1 for a
/// per-tensor zero point) or is null (zero). t and zeroPoint are int8 or uint8.
inline Tensor widenMinusZeroPoint(const Tensor& t, const Tensor* zeroPoint, int64_t inner,
                                  int64_t count) {
  Tensor out(DataType::kInt32, t.shape());
  int32_t* dst = out.data<int32_t>();
  const int64_t n = t.numel();
  const bool isSigned = t.dtype() == DataType::kInt8;
  auto load = [isSigned](const Tensor& src, int64_t i) -> int32_t {
    return isSigned ? src.data<int8_t>()[i] : src.data<uint8_t>()[i];
  };
  if (!zeroPoint || zeroPoint->numel() == 1) {
    const int32_t zp = zeroPoint ? load(*zeroPoint, 0) : 0;
    for (int64_t i = 0; i < n; ++i) dst[i] = load(t, i) - zp;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = load(t, i) - load(*zeroPoint, (i / inner) % count);
  }
  return out;
}

/// Checks a zero point: absent, one value, or `count` values in a 1-D tensor; returns an error
/// message or "".
inline std::string checkZeroPoint(const Tensor* zeroPoint, int64_t count, const char* name) {
  if (!zeroPoint || zeroPoint->numel() == 1) return "";
  if (zeroPoint->rank() != 1 || zeroPoint->numel() != count) {
    return std::string(name) + " must be a scalar or have " + std::to_string(count) +
           " values, got " + zeroPoint->describe();
  }
  return "";
}

}  // namespace kiln::cpu
