#include <string>

#include "core/dtype_dispatch.h"
#include "kiln/dtype.h"

namespace kiln {

size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUint32: return 4;
    case DataType::kUint8: case DataType::kInt8: case DataType::kBool: return 1;
    case DataType::kUint16: case DataType::kInt16: case DataType::kFloat16: case DataType::kBFloat16: return 2;
    case DataType::kInt64: case DataType::kFloat64: case DataType::kUint64: case DataType::kComplex64: return 8;
    case DataType::kComplex128: return 16;
    case DataType::kString: return sizeof(std::string);
    case DataType::kUndefined: return 0;
  }
  return 0;
}

std::string dataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kUint8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUint16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kString: return "string";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat64: return "float64";
    case DataType::kUint32: return "uint32";
    case DataType::kUint64: return "uint64";
    case DataType::kComplex64: return "complex64";
    case DataType::kComplex128: return "complex128";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kUndefined: break;
  }
  return "undefined(" + std::to_string(static_cast<int>(type)) + ")";
}

bool isSupportedDataType(DataType type) {
  return type != DataType::kUndefined && type != DataType::kComplex64 && type != DataType::kComplex128 &&
         static_cast<int>(type) >= 1 && static_cast<int>(type) <= 16;
}

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

bool isSignedInteger(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt16 || type == DataType::kInt32 ||
         type == DataType::kInt64;
}

bool isUnsignedInteger(DataType type) {
  return type == DataType::kUint8 || type == DataType::kUint16 || type == DataType::kUint32 ||
         type == DataType::kUint64;
}

void throwUnsupportedType(DataType type, const char* what) {
  throw Error(ErrorCode::kUnsupportedNode, std::string(what) + ": data type " + dataTypeName(type) + " is not supported");
}

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kInvalidModel: return "invalid model";
    case ErrorCode::kUnsupportedNode: return "unsupported";
    case ErrorCode::kInvalidPlan: return "invalid plan";
    case ErrorCode::kRuntimeError: return "runtime error";
    case ErrorCode::kIoError: return "I/O error";
  }
  return "error";
}

}  // namespace kiln
