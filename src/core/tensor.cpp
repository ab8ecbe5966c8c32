#include "kiln/tensor.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/aligned_memory.h"
#include "core/dtype_dispatch.h"
#include "core/low_precision.h"
#include "core/tensor_limits.h"
#include "kiln/error.h"

namespace kiln {

int64_t shapeNumel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "negative dimension in shape " + shapeToString(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      throw Error(ErrorCode::kInvalidArgument,
                  "shape " + shapeToString(shape) + " has too many elements");
    }
    n *= d;
  }
  return n;
}

std::string shapeToString(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

Tensor::Tensor(DataType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  if (!isSupportedDataType(dtype)) throwUnsupportedType(dtype, "tensor");
  int64_t n = shapeNumel(shape_);
  size_t elem = dataTypeSize(dtype);
  if (n > 0 && static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / elem) {
    throw Error(ErrorCode::kInvalidArgument,
                "tensor shape " + shapeToString(shape_) + " is too large");
  }
  size_t bytes = static_cast<size_t>(n) * elem;
  checkAllocation(
      bytes, [&] { return "tensor " + dataTypeName(dtype) + "[" + shapeToString(shape_) + "]"; });
  if (dtype == DataType::kString) {
    auto strings = std::shared_ptr<std::string[]>(new std::string[n > 0 ? n : 1]);
    data_ = strings.get();
    owner_ = std::shared_ptr<const void>(strings, strings.get());
    return;
  }
  size_t padded = ((bytes + 63) / 64) * 64;
  void* p = allocateAligned(padded);
  if (!p)
    throw Error(ErrorCode::kRuntimeError,
                "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, padded ? padded : 64);
  owner_ = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  data_ = p;
}

Tensor Tensor::wrap(DataType dtype, Shape shape, void* data, std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shapeNumel(shape) != numel()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot view " + describe() + " as shape " +
                                                 shapeToString(shape) + ": element counts differ");
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  if (items_ || isNone())
    return *this;  // a sequence's items are never written in place; none has no data
  Tensor t(dtype_, shape_);
  if (dtype_ == DataType::kString) {
    for (int64_t i = 0; i < numel(); ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (byteSize()) {
    std::memcpy(t.data_, data_, byteSize());
  }
  return t;
}

namespace {

// Saturating, as a double beyond the int64 range has no int64 value (NaN reads as 0).
int64_t saturatedInt64(double d) {
  if (d != d) return 0;
  if (d >= 9223372036854775808.0) return INT64_MAX;
  if (d < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(d);
}

}  // namespace

int64_t Tensor::intAt(int64_t i) const {
  if (isLowPrecision(dtype_))
    return saturatedInt64(lowPrecisionToFloat(dtype_, data<uint8_t>()[i]));
  return dispatchNumericOrBool(dtype_, "Tensor::intAt", [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    const T v = data<T>()[i];
    if constexpr (std::is_same_v<T, uint64_t>) {
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<int64_t>(v);  // exact: through double, INT64_MAX would become INT64_MIN
    } else {
      return saturatedInt64(static_cast<double>(v));
    }
  });
}

double Tensor::doubleAt(int64_t i) const {
  if (isLowPrecision(dtype_)) return lowPrecisionToFloat(dtype_, data<uint8_t>()[i]);
  return dispatchNumericOrBool(dtype_, "Tensor::doubleAt", [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return static_cast<float>(data<T>()[i]);
    } else {
      return static_cast<double>(data<T>()[i]);
    }
  });
}

std::vector<int64_t> Tensor::toInt64Vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  if (v.empty()) return v;  // an empty tensor may have no storage: no memcpy from a null pointer
  if (dtype_ == DataType::kInt64) {
    std::memcpy(v.data(), data_, v.size() * 8);
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = intAt(static_cast<int64_t>(i));
  }
  return v;
}

std::string Tensor::describe() const {
  if (none_ == NoneKind::kTensor) return "optional<" + dataTypeName(dtype_) + ">: none";
  if (none_ == NoneKind::kSequence) return "optional<sequence<" + dataTypeName(dtype_) + ">>: none";
  if (isMap_) {
    return "map<" + dataTypeName(mapKeyType_) + "," + dataTypeName(dtype_) + ">[" +
           std::to_string(mapKeys().numel()) + " entries]";
  }
  if (items_) {
    const std::string element =
        mapKeyType_ == DataType::kUndefined
            ? dataTypeName(dtype_)
            : "map<" + dataTypeName(mapKeyType_) + "," + dataTypeName(dtype_) + ">";
    return "sequence<" + element + ">[" + std::to_string(items_->size()) + " items]";
  }
  return dataTypeName(dtype_) + "[" + shapeToString(shape_) + "]";
}

Tensor Tensor::sequence(DataType elementType, std::vector<Tensor> items) {
  if (!isSupportedDataType(elementType)) throwUnsupportedType(elementType, "sequence");
  for (const Tensor& item : items) {
    if (item.dtype() != elementType || item.isSequence() || item.isMap()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "a sequence of " + dataTypeName(elementType) + " cannot hold " + item.describe());
    }
  }
  Tensor t;
  t.dtype_ = elementType;
  t.shape_ = {0};
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return t;
}

Tensor Tensor::map(Tensor keys, Tensor values) {
  if (keys.dtype() != DataType::kInt64 && keys.dtype() != DataType::kString) {
    throw Error(ErrorCode::kInvalidArgument,
                "a map's keys must be int64 or string, not " + keys.describe());
  }
  if (keys.isSequence() || keys.isMap() || values.isSequence() || values.isMap() ||
      keys.rank() != 1 || values.rank() != 1 || keys.numel() != values.numel()) {
    throw Error(ErrorCode::kInvalidArgument, "a map needs 1-D keys and values of one length, not " +
                                                 keys.describe() + " and " + values.describe());
  }
  Tensor t;
  t.dtype_ = values.dtype();
  t.shape_ = {0};
  t.isMap_ = true;
  t.mapKeyType_ = keys.dtype();
  t.items_ = std::make_shared<const std::vector<Tensor>>(
      std::vector<Tensor>{std::move(keys), std::move(values)});
  return t;
}

Tensor Tensor::sequenceOfMaps(DataType keyType, DataType valueType, std::vector<Tensor> maps) {
  for (const Tensor& m : maps) {
    if (!m.isMap() || m.mapKeyType() != keyType || m.dtype() != valueType) {
      throw Error(ErrorCode::kInvalidArgument, "a sequence of map<" + dataTypeName(keyType) + "," +
                                                   dataTypeName(valueType) + "> cannot hold " +
                                                   m.describe());
    }
  }
  Tensor t;
  t.dtype_ = valueType;
  t.shape_ = {0};
  t.mapKeyType_ = keyType;
  t.items_ = std::make_shared<const std::vector<Tensor>>(std::move(maps));
  return t;
}

const Tensor& Tensor::mapKeys() const {
  if (!isMap_) throw Error(ErrorCode::kInvalidArgument, describe() + " is not a map");
  return (*items_)[0];
}

const Tensor& Tensor::mapValues() const {
  if (!isMap_) throw Error(ErrorCode::kInvalidArgument, describe() + " is not a map");
  return (*items_)[1];
}

Tensor Tensor::none(DataType elementType, bool ofSequence) {
  if (!isSupportedDataType(elementType)) throwUnsupportedType(elementType, "optional");
  Tensor t;
  t.dtype_ = elementType;
  t.shape_ = {0};
  t.none_ = ofSequence ? NoneKind::kSequence : NoneKind::kTensor;
  return t;
}

const std::vector<Tensor>& Tensor::sequenceItems() const {
  static const std::vector<Tensor> kNone;
  return items_ && !isMap_ ? *items_ : kNone;
}

void throwValueCountMismatch(const Tensor& t, size_t count) {
  throw Error(ErrorCode::kInvalidArgument, t.describe() + " needs " + std::to_string(t.numel()) +
                                               " values, got " + std::to_string(count));
}

}  // namespace kiln
