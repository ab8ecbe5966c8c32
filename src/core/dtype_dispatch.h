// Maps a runtime DataType to its C++ storage type for templated kernels.
#pragma once
#include <string>
#include <type_traits>

#include "core/half.h"
#include "core/internal_api.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
constexpr DataType dataTypeOf();
template <>
constexpr DataType dataTypeOf<float>() {
  return DataType::kFloat32;
}
template <>
constexpr DataType dataTypeOf<double>() {
  return DataType::kFloat64;
}
template <>
constexpr DataType dataTypeOf<Half>() {
  return DataType::kFloat16;
}
template <>
constexpr DataType dataTypeOf<BFloat16>() {
  return DataType::kBFloat16;
}
template <>
constexpr DataType dataTypeOf<int8_t>() {
  return DataType::kInt8;
}
template <>
constexpr DataType dataTypeOf<int16_t>() {
  return DataType::kInt16;
}
template <>
constexpr DataType dataTypeOf<int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType dataTypeOf<int64_t>() {
  return DataType::kInt64;
}
template <>
constexpr DataType dataTypeOf<uint8_t>() {
  return DataType::kUint8;
}
template <>
constexpr DataType dataTypeOf<uint16_t>() {
  return DataType::kUint16;
}
template <>
constexpr DataType dataTypeOf<uint32_t>() {
  return DataType::kUint32;
}
template <>
constexpr DataType dataTypeOf<uint64_t>() {
  return DataType::kUint64;
}
template <>
constexpr DataType dataTypeOf<bool>() {
  return DataType::kBool;
}
template <>
constexpr DataType dataTypeOf<std::string>() {
  return DataType::kString;
}

[[noreturn]] KILN_INTERNAL_API void throwUnsupportedType(DataType type, const char* what);

/// Calls fn(TypeTag<T>{}) for float, double, float16, bfloat16.
template <typename Fn>
decltype(auto) dispatchFloat(DataType type, const char* what, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32:
      return fn(TypeTag<float>{});
    case DataType::kFloat64:
      return fn(TypeTag<double>{});
    case DataType::kFloat16:
      return fn(TypeTag<Half>{});
    case DataType::kBFloat16:
      return fn(TypeTag<BFloat16>{});
    default:
      throwUnsupportedType(type, what);
  }
}

/// Calls fn(TypeTag<T>{}) for every integer type (not bool).
template <typename Fn>
decltype(auto) dispatchInteger(DataType type, const char* what, Fn&& fn) {
  switch (type) {
    case DataType::kInt8:
      return fn(TypeTag<int8_t>{});
    case DataType::kInt16:
      return fn(TypeTag<int16_t>{});
    case DataType::kInt32:
      return fn(TypeTag<int32_t>{});
    case DataType::kInt64:
      return fn(TypeTag<int64_t>{});
    case DataType::kUint8:
      return fn(TypeTag<uint8_t>{});
    case DataType::kUint16:
      return fn(TypeTag<uint16_t>{});
    case DataType::kUint32:
      return fn(TypeTag<uint32_t>{});
    case DataType::kUint64:
      return fn(TypeTag<uint64_t>{});
    default:
      throwUnsupportedType(type, what);
  }
}

/// Calls fn(TypeTag<T>{}) for every numeric type (float and integer, not bool).
template <typename Fn>
decltype(auto) dispatchNumeric(DataType type, const char* what, Fn&& fn) {
  if (isFloatingPoint(type)) return dispatchFloat(type, what, std::forward<Fn>(fn));
  return dispatchInteger(type, what, std::forward<Fn>(fn));
}

/// Calls fn(TypeTag<T>{}) for every numeric type and bool.
template <typename Fn>
decltype(auto) dispatchNumericOrBool(DataType type, const char* what, Fn&& fn) {
  if (type == DataType::kBool) return fn(TypeTag<bool>{});
  return dispatchNumeric(type, what, std::forward<Fn>(fn));
}

/// Calls fn(TypeTag<T>{}) for every type a tensor can hold, strings included.
template <typename Fn>
decltype(auto) dispatchAll(DataType type, const char* what, Fn&& fn) {
  if (type == DataType::kString) return fn(TypeTag<std::string>{});
  return dispatchNumericOrBool(type, what, std::forward<Fn>(fn));
}

}  // namespace kiln
