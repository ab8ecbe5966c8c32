// Element types of kiln tensors. Values match ONNX's TensorProto.DataType.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

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
};

/// Bytes per element (sizeof(std::string) for strings, 0 for undefined).
size_t dataTypeSize(DataType type);
/// Lower-case name as numpy spells it ("float32", "int64", "bool", "bfloat16", "string").
std::string dataTypeName(DataType type);
/// True for the values kiln can hold in a Tensor.
bool isSupportedDataType(DataType type);
bool isFloatingPoint(DataType type);
bool isSignedInteger(DataType type);
bool isUnsignedInteger(DataType type);

}  // namespace kiln
