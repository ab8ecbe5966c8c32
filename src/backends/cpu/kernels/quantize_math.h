// Rounding, saturation and type conversions shared by the quantization kernels (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/low_precision.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// v rounded to the precision of C (float, double, Half or BFloat16), returned as a double.
/// Double rounding through double is harmless for one +, -, * or / of C values: double has more
/// than twice C's significand bits.
template <typename C>
double roundTo(double v) {
  if constexpr (std::is_same_v<C, double>) {
    return v;
  } else if constexpr (std::is_same_v<C, float>) {
    return static_cast<float>(v);
  } else {
    return static_cast<float>(C(static_cast<float>(v)));
  }
}

/// Quantizes an already scaled value: rounds half to even (the default rounding mode, which kiln
/// never changes), adds the zero point, then saturates to Q's range. NaN gives Q's lowest value,
/// as in ONNX Runtime.
template <typename Q>
Q roundAndSaturate(double scaled, double zeroPoint) {
  constexpr double lowest = static_cast<double>(std::numeric_limits<Q>::lowest());
  if (std::isnan(scaled)) return static_cast<Q>(lowest);
  return static_cast<Q>(std::clamp(std::nearbyint(scaled) + zeroPoint, lowest,
                                   static_cast<double>(std::numeric_limits<Q>::max())));
}

/// An int32 accumulator times a requantization multiplier, as ONNX Runtime (MLAS) computes it:
/// float(acc) * float(multiplier) in float32 (then roundAndSaturate rounds half to even). The
/// 8-bit GEMM's epilogue (qgemm_epilogue.cpp) computes exactly this, so the two agree bit for bit.
inline double requantizeInFloat(int32_t acc, double multiplier) {
  return static_cast<double>(static_cast<float>(acc) * static_cast<float>(multiplier));
}

/// a + b wrapping around like the int32 arithmetic of an integer kernel.
inline int32_t wrappingAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

/// roundAndSaturate for a range given at run time (int4, uint4, int2, uint2); NaN gives `lowest`.
inline int64_t roundAndClamp(double scaled, double zeroPoint, int64_t lowest, int64_t highest) {
  if (std::isnan(scaled)) return lowest;
  return static_cast<int64_t>(std::clamp(std::nearbyint(scaled) + zeroPoint,
                                         static_cast<double>(lowest),
                                         static_cast<double>(highest)));
}

/// Any numeric kiln element (including Half and BFloat16) as double, exactly.
template <typename T>
double toDouble(T v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(v);
  } else {
    return static_cast<float>(v);
  }
}

/// Every value of a (small) scale or zero-point tensor as double; {def} when the tensor is absent.
inline std::vector<double> valuesAsDouble(const Tensor* t, double def) {
  if (!t) return {def};
  std::vector<double> out(static_cast<size_t>(t->numel()));
  if (isLowPrecision(t->dtype())) {
    const uint8_t* src = t->data<uint8_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = lowPrecisionToFloat(t->dtype(), src[i]);
    return out;
  }
  dispatchNumeric(t->dtype(), "quantization parameter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = t->data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = toDouble(src[i]);
  });
  return out;
}

/// Calls fn(TypeTag<Q>{}) for the integer types kiln quantizes to.
template <typename Fn>
decltype(auto) dispatchQuantized(DataType type, const char* what, Fn&& fn) {
  switch (type) {
    case DataType::kInt8:
      return fn(TypeTag<int8_t>{});
    case DataType::kUint8:
      return fn(TypeTag<uint8_t>{});
    case DataType::kInt16:
      return fn(TypeTag<int16_t>{});
    case DataType::kUint16:
      return fn(TypeTag<uint16_t>{});
    case DataType::kInt32:
      return fn(TypeTag<int32_t>{});
    default:
      throwUnsupportedType(type, what);
  }
}

}  // namespace kiln::cpu
