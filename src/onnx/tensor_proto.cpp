#include "onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/bool_bytes.h"
#include "core/dtype_dispatch.h"
#include "core/low_precision.h"
#include "kiln/error.h"

namespace kiln::onnx_import {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& where, const std::string& message) {
  throw Error(ErrorCode::kInvalidModel, where + ": " + message);
}

// Memory-maps [offset, offset+length) of a file; the mapping lives as long as the returned owner.
std::shared_ptr<const void> mapFileRange(const std::string& path, uint64_t offset, uint64_t length,
                                         void** data, const std::string& where) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(where, "cannot open external data file '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(where, "external data '" + path + "' is not a regular file");
  }
  uint64_t fileSize = static_cast<uint64_t>(st.st_size);
  if (offset > fileSize || length > fileSize - offset) {
    ::close(fd);
    fail(where, "external data range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                    ") is past the end of '" + path + "' (" + std::to_string(fileSize) + " bytes)");
  }
  if (length == 0) {
    ::close(fd);
    *data = nullptr;
    return nullptr;
  }
  uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  uint64_t alignedOffset = offset - offset % page;
  size_t mapLength = static_cast<size_t>(length + (offset - alignedOffset));
  void* base =
      ::mmap(nullptr, mapLength, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(alignedOffset));
  ::close(fd);
  if (base == MAP_FAILED)
    fail(where, "cannot map external data '" + path + "': " + std::strerror(errno));
  *data = static_cast<char*>(base) + (offset - alignedOffset);
  return std::shared_ptr<const void>(
      base, [mapLength](const void* p) { ::munmap(const_cast<void*>(p), mapLength); });
}

// The external file's path, refused if it leaves the model's folder.
std::string resolveExternalPath(const std::string& location, const std::string& baseDir,
                                const std::string& where) {
  if (location.empty()) fail(where, "external data has no 'location'");
  fs::path rel(location);
  if (rel.is_absolute())
    fail(where, "external data location '" + location + "' must be relative to the model's folder");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(baseDir.empty() ? "." : baseDir), ec);
  fs::path full = fs::weakly_canonical(base / rel, ec);
  auto [baseEnd, fullIt] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (ec || baseEnd != base.end()) {
    fail(where, "external data location '" + location + "' points outside the model's folder " +
                    base.string());
  }
  return full.string();
}

// Bytes a tensor's values take in an ONNX file: int4 / uint4 / float4 / int2 / uint2 are packed.
uint64_t storedByteCount(DataType dtype, int64_t numel) {
  if (packedElementsPerByte(dtype) > 1) return packedByteCount(dtype, numel);
  return static_cast<uint64_t>(numel) * dataTypeSize(dtype);
}

// A tensor of one byte per element from packed 4-bit or 2-bit values.
Tensor unpacked(DataType dtype, Shape shape, const uint8_t* packed) {
  Tensor t(dtype, std::move(shape));
  unpackLowPrecision(dtype, packed, t.numel(), t.data<uint8_t>());
  return t;
}

Tensor externalTensor(const onnx::TensorProto& proto, DataType dtype, Shape shape,
                      const std::string& baseDir, const std::string& where) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : proto.external_data()) {
    try {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::stoull(kv.value());
      else if (kv.key() == "length")
        length = std::stoll(kv.value());
    } catch (const std::exception&) {
      fail(where, "external data field '" + kv.key() + "' has a bad value '" + kv.value() + "'");
    }
  }
  if (dtype == DataType::kString) fail(where, "string tensors cannot use external data");
  uint64_t expected = storedByteCount(dtype, shapeNumel(shape));
  if (length >= 0 && static_cast<uint64_t>(length) != expected) {
    fail(where, "external data length " + std::to_string(length) + " does not match shape " +
                    shapeToString(shape) + " of " + dataTypeName(dtype) + " (" +
                    std::to_string(expected) + " bytes)");
  }
  std::string path = resolveExternalPath(location, baseDir, where);
  void* data = nullptr;
  auto owner = mapFileRange(path, offset, expected, &data, where);
  if (!data) return Tensor(dtype, shape);
  if (packedElementsPerByte(dtype) > 1)
    return unpacked(dtype, std::move(shape), static_cast<const uint8_t*>(data));
  if (dtype == DataType::kBool)
    return boolsFromBytes(std::move(shape), static_cast<uint8_t*>(data));
  return Tensor::wrap(dtype, std::move(shape), data, std::move(owner));
}

// The typed field that holds a dtype's values, and how many it holds.
std::pair<const char*, int64_t> typedField(const onnx::TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return {"float_data", proto.float_data_size()};
    case DataType::kFloat64:
      return {"double_data", proto.double_data_size()};
    case DataType::kInt64:
      return {"int64_data", proto.int64_data_size()};
    case DataType::kUint64:
    case DataType::kUint32:
      return {"uint64_data", proto.uint64_data_size()};
    case DataType::kString:
      return {"string_data", proto.string_data_size()};
    default:
      return {"int32_data", proto.int32_data_size()};
  }
}

// Values stored one per element in a typed repeated field.
template <typename T, typename Field>
void copyTyped(const Field& field, Tensor& t) {
  T* out = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(field.Get(static_cast<int>(i)));
}

// float16 / bfloat16 store their bit patterns in int32_data.
template <typename T>
void copyBits16(const google::protobuf::RepeatedField<int32_t>& field, Tensor& t) {
  T* out = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i)
    out[i].bits = static_cast<uint16_t>(field.Get(static_cast<int>(i)));
}

void copyTypedFields(const onnx::TensorProto& proto, Tensor& t, const std::string& where) {
  switch (t.dtype()) {
    case DataType::kFloat32:
      return copyTyped<float>(proto.float_data(), t);
    case DataType::kFloat64:
      return copyTyped<double>(proto.double_data(), t);
    case DataType::kInt64:
      return copyTyped<int64_t>(proto.int64_data(), t);
    case DataType::kUint64:
      return copyTyped<uint64_t>(proto.uint64_data(), t);
    case DataType::kUint32:
      return copyTyped<uint32_t>(proto.uint64_data(), t);
    case DataType::kInt32:
      return copyTyped<int32_t>(proto.int32_data(), t);
    case DataType::kInt16:
      return copyTyped<int16_t>(proto.int32_data(), t);
    case DataType::kInt8:
      return copyTyped<int8_t>(proto.int32_data(), t);
    case DataType::kUint16:
      return copyTyped<uint16_t>(proto.int32_data(), t);
    case DataType::kUint8:
      return copyTyped<uint8_t>(proto.int32_data(), t);
    case DataType::kBool:
      return copyTyped<bool>(proto.int32_data(), t);
    case DataType::kFloat16:
      return copyBits16<Half>(proto.int32_data(), t);
    case DataType::kBFloat16:
      return copyBits16<BFloat16>(proto.int32_data(), t);
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
      return copyTyped<uint8_t>(proto.int32_data(), t);
    case DataType::kString: {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<std::string>()[i] = proto.string_data(static_cast<int>(i));
      return;
    }
    default:
      fail(where, "data type " + dataTypeName(t.dtype()) + " is not supported");
  }
}

}  // namespace

Tensor tensorFromProto(const onnx::TensorProto& proto, const std::string& baseDir,
                       const std::string& where, std::shared_ptr<std::string> rawData) {
  auto dtype = static_cast<DataType>(proto.data_type());
  if (!isSupportedDataType(dtype)) {
    throw Error(ErrorCode::kUnsupportedNode,
                where + ": data type " + dataTypeName(dtype) + " is not supported");
  }
  Shape shape;
  for (int64_t d : proto.dims()) {
    if (d < 0) fail(where, "negative dimension " + std::to_string(d));
    shape.push_back(d);
  }
  int64_t numel;
  try {
    numel = shapeNumel(shape);
  } catch (const Error& e) {
    fail(where, e.what());
  }
  if (proto.has_data_location() && proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return externalTensor(proto, dtype, std::move(shape), baseDir, where);
  }
  if (rawData || proto.has_raw_data()) {
    const std::string& raw = rawData ? *rawData : proto.raw_data();
    if (dtype == DataType::kString) fail(where, "string tensors cannot use raw_data");
    uint64_t expected = storedByteCount(dtype, numel);
    if (raw.size() != expected) {
      fail(where, "raw_data has " + std::to_string(raw.size()) + " bytes but shape " +
                      shapeToString(shape) + " of " + dataTypeName(dtype) + " needs " +
                      std::to_string(expected));
    }
    if (packedElementsPerByte(dtype) > 1) {
      return unpacked(dtype, std::move(shape), reinterpret_cast<const uint8_t*>(raw.data()));
    }
    if (dtype == DataType::kBool)
      return boolsFromBytes(std::move(shape), reinterpret_cast<const uint8_t*>(raw.data()));
    if (rawData && expected) return Tensor::wrap(dtype, std::move(shape), rawData->data(), rawData);
    Tensor t(dtype, shape);
    if (expected) std::memcpy(t.raw(), raw.data(), expected);
    return t;
  }
  auto [field, count] = typedField(proto, dtype);
  if (packedElementsPerByte(dtype) > 1) {  // int32_data holds the packed bytes, one per entry
    if (static_cast<uint64_t>(count) != storedByteCount(dtype, numel)) {
      fail(where, std::string(field) + " holds " + std::to_string(count) +
                      " packed bytes but shape " + shapeToString(shape) + " of " +
                      dataTypeName(dtype) + " needs " +
                      std::to_string(storedByteCount(dtype, numel)));
    }
    std::vector<uint8_t> packed(proto.int32_data().begin(), proto.int32_data().end());
    return unpacked(dtype, std::move(shape), packed.data());
  }
  if (count != numel) {
    fail(where, std::string(field) + " holds " + std::to_string(count) + " values but shape " +
                    shapeToString(shape) + " needs " + std::to_string(numel));
  }
  Tensor t(dtype, shape);
  if (numel > 0) copyTypedFields(proto, t, where);
  return t;
}

void tensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto) {
  if (tensor.isSequence() || tensor.isNone()) {
    throw Error(ErrorCode::kInvalidArgument, name + ": " + tensor.describe() + " is not a tensor");
  }
  proto.Clear();
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  if (tensor.dtype() == DataType::kString) {
    for (int64_t i = 0; i < tensor.numel(); ++i)
      proto.add_string_data(tensor.data<std::string>()[i]);
  } else if (packedElementsPerByte(tensor.dtype()) > 1) {
    proto.set_raw_data(packLowPrecision(tensor.dtype(), tensor.data<uint8_t>(), tensor.numel()));
  } else if (tensor.byteSize()) {
    proto.set_raw_data(std::string(static_cast<const char*>(tensor.raw()), tensor.byteSize()));
  } else {
    proto.set_raw_data("");
  }
}

}  // namespace kiln::onnx_import
