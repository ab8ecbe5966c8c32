// Element types of kiln tensors. Values match ONNX's TensorProto.DataType.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "kiln/export.h"

namespace kiln {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  // Low-precision types (ONNX 1.14+). A kiln tensor stores them unpacked, one byte per element,
  // holding the format's bit pattern in its low bits (as ml_dtypes does); ONNX files pack the
  // 4-bit and 2-bit ones (see src/core/low_precision.h).
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUint2 = 25,
  kInt2 = 26,
};

/// Bytes per element (sizeof(std::string) for strings, 0 for undefined).
KILN_API size_t dataTypeSize(DataType type);
/// Lower-case name as numpy / ml_dtypes spell it ("float32", "int64", "bool", "bfloat16", "string",
/// "float8_e4m3fn", "int4").
KILN_API std::string dataTypeName(DataType type);
/// True for the values kiln can hold in a Tensor.
KILN_API bool isSupportedDataType(DataType type);
KILN_API bool isFloatingPoint(DataType type);
KILN_API bool isSignedInteger(DataType type);
KILN_API bool isUnsignedInteger(DataType type);
/// True for the float8, float4, int4, uint4, int2 and uint2 types (one byte per element in a
/// Tensor).
KILN_API bool isLowPrecision(DataType type);

}  // namespace kiln
