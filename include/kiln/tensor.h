// A typed, shaped, reference-counted block of host memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/export.h"

namespace kiln {

using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar).
KILN_API int64_t shapeNumel(const Shape& shape);
/// "1x3x224x224" ("scalar" for rank 0).
KILN_API std::string shapeToString(const Shape& shape);

class KILN_API Tensor {
 public:
  Tensor() = default;
  /// Allocates zero-initialized storage (64-byte aligned; strings default-constructed).
  Tensor(DataType dtype, Shape shape);
  /// Views memory owned by `owner` (kept alive as long as the tensor or a copy lives).
  static Tensor wrap(DataType dtype, Shape shape, void* data, std::shared_ptr<const void> owner);
  /// A scalar or 1-D tensor from host values.
  template <typename T>
  static Tensor fromVector(DataType dtype, Shape shape, const std::vector<T>& values);
  /// An ONNX sequence value: an ordered list of tensors of one element type (its dtype()). It has
  /// no storage of its own (shape {0}), so code that does not look for sequences reads nothing.
  static Tensor sequence(DataType elementType, std::vector<Tensor> items);
  /// An ONNX map (ai.onnx.ml's ZipMap output): 1-D `keys` (int64 or string) paired with the 1-D
  /// `values` of the same length; dtype() is the values' type. No storage of its own (shape {0}).
  static Tensor map(Tensor keys, Tensor values);
  /// A sequence of maps whose keys are `keyType` and values `valueType` (ZipMap's
  /// seq(map(int64|string, float))); the types make an empty sequence's type known.
  static Tensor sequenceOfMaps(DataType keyType, DataType valueType, std::vector<Tensor> maps);
  /// An empty ONNX optional ("none") whose type is `elementType` (of a sequence when
  /// `ofSequence`). A present optional is simply its value, a tensor or a sequence: only the
  /// declared type (ir::TypeInfo::isOptional) tells the two apart, so kernels see no wrapper.
  /// Like a sequence it has no storage (shape {0}).
  static Tensor none(DataType elementType, bool ofSequence = false);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shapeNumel(shape_); }
  size_t byteSize() const { return static_cast<size_t>(numel()) * dataTypeSize(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }

  /// Same storage, another shape with the same element count.
  Tensor reshaped(Shape shape) const;
  /// A deep copy with its own storage.
  Tensor clone() const;
  /// Reads element i converted to int64 / double (any numeric or bool dtype); intAt is exact for
  /// integer types and saturates floats beyond the int64 range (NaN reads as 0).
  int64_t intAt(int64_t i) const;
  double doubleAt(int64_t i) const;
  /// All elements as int64 (for shape-like tensors).
  std::vector<int64_t> toInt64Vector() const;
  std::string describe()
      const;  // "float32[1x3x224x224]", "sequence<float32>[3 items]", "optional<float32>: none",
              // "map<int64,float32>[3 entries]", "sequence<map<string,float32>>[2 items]"

  bool isSequence() const { return items_ != nullptr && !isMap_; }
  /// The tensors of a sequence value (empty for a plain tensor).
  const std::vector<Tensor>& sequenceItems() const;
  /// An empty optional (see none()); isNoneOfSequence: one whose type is a sequence.
  bool isNone() const { return none_ != NoneKind::kNotNone; }
  bool isNoneOfSequence() const { return none_ == NoneKind::kSequence; }
  bool isMap() const { return isMap_; }
  /// The key type of a map, or of the maps of a sequence of maps; kUndefined otherwise.
  DataType mapKeyType() const { return mapKeyType_; }
  /// A map's keys and values (see map()); throws for any other value.
  const Tensor& mapKeys() const;
  const Tensor& mapValues() const;

 private:
  enum class NoneKind : uint8_t { kNotNone, kTensor, kSequence };
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
  std::shared_ptr<const void> owner_;
  void* data_ = nullptr;
  std::shared_ptr<const std::vector<Tensor>> items_;  // a sequence's items; a map's keys, values
  NoneKind none_ = NoneKind::kNotNone;
  bool isMap_ = false;
  DataType mapKeyType_ = DataType::kUndefined;
};

[[noreturn]] KILN_API void throwValueCountMismatch(const Tensor& t, size_t count);

template <typename T>
Tensor Tensor::fromVector(DataType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel() || sizeof(T) != dataTypeSize(dtype)) {
    throwValueCountMismatch(t, values.size());
  }
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

}  // namespace kiln
