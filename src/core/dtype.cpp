#include <string>

#include "core/dtype_dispatch.h"
#include "kiln/dtype.h"

namespace kiln {

size_t dataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUint32:
      return 4;
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kUint4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1:
    case DataType::kFloat8E8M0:
    case DataType::kUint2:
    case DataType::kInt2:
      return 1;
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
    case DataType::kFloat64:
    case DataType::kUint64:
    case DataType::kComplex64:
      return 8;
    case DataType::kComplex128:
      return 16;
    case DataType::kString:
      return sizeof(std::string);
    case DataType::kUndefined:
      return 0;
  }
  return 0;
}

std::string dataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kUint8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kUint16:
      return "uint16";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kString:
      return "string";
    case DataType::kBool:
      return "bool";
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat64:
      return "float64";
    case DataType::kUint32:
      return "uint32";
    case DataType::kUint64:
      return "uint64";
    case DataType::kComplex64:
      return "complex64";
    case DataType::kComplex128:
      return "complex128";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DataType::kFloat8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case DataType::kFloat8E5M2:
      return "float8_e5m2";
    case DataType::kFloat8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case DataType::kUint4:
      return "uint4";
    case DataType::kInt4:
      return "int4";
    case DataType::kFloat4E2M1:
      return "float4_e2m1fn";
    case DataType::kFloat8E8M0:
      return "float8_e8m0fnu";
    case DataType::kUint2:
      return "uint2";
    case DataType::kInt2:
      return "int2";
    case DataType::kUndefined:
      break;
  }
  return "undefined(" + std::to_string(static_cast<int>(type)) + ")";
}

bool isSupportedDataType(DataType type) {
  return type != DataType::kUndefined && type != DataType::kComplex64 &&
         type != DataType::kComplex128 && static_cast<int>(type) >= 1 &&
         static_cast<int>(type) <= 26;
}

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16 || type == DataType::kFloat8E4M3FN ||
         type == DataType::kFloat8E4M3FNUZ || type == DataType::kFloat8E5M2 ||
         type == DataType::kFloat8E5M2FNUZ || type == DataType::kFloat4E2M1 ||
         type == DataType::kFloat8E8M0;
}

bool isSignedInteger(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt16 || type == DataType::kInt32 ||
         type == DataType::kInt64 || type == DataType::kInt4 || type == DataType::kInt2;
}

bool isUnsignedInteger(DataType type) {
  return type == DataType::kUint8 || type == DataType::kUint16 || type == DataType::kUint32 ||
         type == DataType::kUint64 || type == DataType::kUint4 || type == DataType::kUint2;
}

bool isLowPrecision(DataType type) {
  return static_cast<int>(type) >= static_cast<int>(DataType::kFloat8E4M3FN) &&
         static_cast<int>(type) <= static_cast<int>(DataType::kInt2);
}

void throwUnsupportedType(DataType type, const char* what) {
  throw Error(ErrorCode::kUnsupportedNode,
              std::string(what) + ": data type " + dataTypeName(type) + " is not supported");
}

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kSuccess:
      return "SUCCESS";
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kInvalidModel:
      return "INVALID_MODEL";
    case ErrorCode::kInvalidValue:
      return "INVALID_VALUE";
    case ErrorCode::kUnsupportedNode:
      return "UNSUPPORTED_NODE";
    case ErrorCode::kInvalidPlan:
      return "INVALID_PLAN";
    case ErrorCode::kIoError:
      return "IO_ERROR";
    case ErrorCode::kRuntimeError:
      return "RUNTIME_ERROR";
    case ErrorCode::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case ErrorCode::kInternalError:
      return "INTERNAL_ERROR";
  }
  return "UNKNOWN";
}

}  // namespace kiln
