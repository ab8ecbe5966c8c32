// ONNX values in protobuf files, the format of the ONNX test data sets (input_N.pb, output_N.pb):
// a TensorProto, SequenceProto or OptionalProto for a kiln tensor, sequence or optional (see
// Tensor::sequence and Tensor::none). The header has no protobuf types, so the CLI can use it.
#pragma once
#include <string>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::onnx_import {

/// The ONNX type of a value: a tensor, a sequence of tensors, or an optional of either; or a
/// sequence of maps (ZipMap's output, which kiln writes but does not read).
struct ValueType {
  DataType dtype = DataType::kUndefined;  // the tensor's, or the sequence's element type
  bool isSequence = false;
  bool isOptional = false;
  DataType mapKeyType = DataType::kUndefined;  // set for maps: dtype is then the value type
};

/// "a tensor of float32", "a sequence of int64", "an optional sequence of float32",
/// "a sequence of map<int64,float32>".
KILN_INTERNAL_API std::string describeValueType(const ValueType& type);

/// Reads a value of `expected` type from a .pb file: a TensorProto for a tensor, a SequenceProto
/// for a sequence, an OptionalProto for an optional. `what` names the value in errors ("input
/// 'x'"); a file of another message, or of another element type, is refused naming what it holds.
KILN_INTERNAL_API Tensor readValueFile(const std::string& path, const ValueType& expected,
                                       const std::string& what);
/// The same from the file's bytes in memory; `path` names it in errors.
KILN_INTERNAL_API Tensor readValueBytes(const std::string& bytes, const std::string& path,
                                        const ValueType& expected, const std::string& what);

/// Writes `value` to a .pb file as the message for `type`: a value that is a sequence, or none,
/// is written as one whatever `type` says; a sequence of maps is a SequenceProto of MapProtos, each
/// map's values a SequenceProto of scalar tensors (as onnx.numpy_helper.from_dict writes them).
/// `name` goes to the message's name field.
KILN_INTERNAL_API void writeValueFile(const std::string& path, const Tensor& value,
                                      const ValueType& type, const std::string& name);

}  // namespace kiln::onnx_import
