#include "onnx/value_proto.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/error.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

namespace {

namespace pb = google::protobuf;

[[noreturn]] void fail(const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, message);
}

// Protobuf parsing is lenient: bytes of one message often parse as another, the fields it does
// not know kept aside as unknown fields. A file holds a message only if nothing was left unknown.
bool hasUnknownFields(const pb::Message& message) {
  const pb::Reflection* reflection = message.GetReflection();
  if (!reflection->GetUnknownFields(message).empty()) return true;
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!field->is_repeated()) {
      if (hasUnknownFields(reflection->GetMessage(message, field))) return true;
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i)
      if (hasUnknownFields(reflection->GetRepeatedMessage(message, field, i))) return true;
  }
  return false;
}

bool parsesAs(pb::Message& message, const std::string& bytes) {
  return message.ParseFromString(bytes) && !hasUnknownFields(message);
}

// Which of the three value messages `bytes` plausibly holds, for error messages.
std::string messageKind(const std::string& bytes) {
  if (onnx::TensorProto t; parsesAs(t, bytes) && t.has_data_type()) return "a TensorProto";
  if (onnx::SequenceProto s; parsesAs(s, bytes) && s.has_elem_type()) return "a SequenceProto";
  if (onnx::OptionalProto o; parsesAs(o, bytes) && o.has_elem_type()) return "an OptionalProto";
  return "no TensorProto, SequenceProto or OptionalProto";
}

std::string readBytes(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(what + ": cannot open '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

const char* messageName(const ValueType& type) {
  return type.isOptional   ? "an OptionalProto"
         : type.isSequence ? "a SequenceProto"
                           : "a TensorProto";
}

// The element type a proto says, checked against the expected one (undefined: any).
void checkDtype(DataType got, DataType expected, const std::string& where) {
  if (expected != DataType::kUndefined && got != expected) {
    fail(where + " holds " + dataTypeName(got) + " values, expected " + dataTypeName(expected));
  }
}

Tensor tensorFrom(const onnx::TensorProto& proto, DataType expected, const std::string& where) {
  Tensor t = tensorFromProto(proto, "", where);
  checkDtype(t.dtype(), expected, where);
  return t;
}

Tensor sequenceFrom(const onnx::SequenceProto& proto, DataType expected, const std::string& where) {
  const bool tensors = proto.elem_type() == onnx::SequenceProto::TENSOR;
  if (!tensors &&
      !(proto.elem_type() == onnx::SequenceProto::UNDEFINED && proto.tensor_values_size() == 0)) {
    fail(where + " is a sequence of " + onnx::SequenceProto::DataType_Name(proto.elem_type()) +
         " values; kiln sequences hold tensors");
  }
  std::vector<Tensor> items;
  for (int i = 0; i < proto.tensor_values_size(); ++i) {
    items.push_back(
        tensorFrom(proto.tensor_values(i), expected, where + " item " + std::to_string(i)));
  }
  DataType dtype = items.empty() ? expected : items[0].dtype();
  if (dtype == DataType::kUndefined)
    fail(where + " is an empty sequence whose element type is not known");
  for (size_t i = 1; i < items.size(); ++i)
    checkDtype(items[i].dtype(), dtype, where + " item " + std::to_string(i));
  return Tensor::sequence(dtype, std::move(items));
}

Tensor optionalFrom(const onnx::OptionalProto& proto, const ValueType& expected,
                    const std::string& where) {
  using OP = onnx::OptionalProto;
  switch (proto.elem_type()) {
    case OP::UNDEFINED:
      if (expected.dtype == DataType::kUndefined)
        fail(where + " is an empty optional whose element type is not known");
      return Tensor::none(expected.dtype, expected.isSequence);
    case OP::TENSOR:
      if (expected.isSequence) fail(where + " holds a tensor, expected a sequence");
      return tensorFrom(proto.tensor_value(), expected.dtype, where);
    case OP::SEQUENCE:
      if (!expected.isSequence) fail(where + " holds a sequence, expected a tensor");
      return sequenceFrom(proto.sequence_value(), expected.dtype, where);
    default:
      fail(where + " holds a " + OP::DataType_Name(proto.elem_type()) +
           " value; kiln optionals hold tensors or sequences");
  }
}

void mapToProto(const Tensor& map, onnx::MapProto& proto) {
  const Tensor& keys = map.mapKeys();
  const Tensor& values = map.mapValues();
  proto.set_key_type(static_cast<int32_t>(keys.dtype()));
  for (int64_t i = 0; i < keys.numel(); ++i) {
    if (keys.dtype() == DataType::kString)
      proto.add_string_keys(keys.data<std::string>()[i]);
    else
      proto.add_keys(keys.data<int64_t>()[i]);
  }
  onnx::SequenceProto& valueProtos = *proto.mutable_values();
  valueProtos.set_elem_type(onnx::SequenceProto::TENSOR);
  const size_t itemSize = dataTypeSize(values.dtype());
  for (int64_t i = 0; i < values.numel(); ++i) {
    Tensor scalar(values.dtype(), {});
    std::memcpy(scalar.raw(), values.data<uint8_t>() + i * itemSize, itemSize);
    tensorToProto(scalar, "", *valueProtos.add_tensor_values());
  }
}

}  // namespace

std::string describeValueType(const ValueType& type) {
  std::string text = type.isOptional ? "an optional " : "a ";
  text += type.isSequence ? "sequence of " : "tensor of ";
  const std::string element =
      type.dtype == DataType::kUndefined ? std::string("any type") : dataTypeName(type.dtype);
  if (type.mapKeyType != DataType::kUndefined)
    return text + "map<" + dataTypeName(type.mapKeyType) + "," + element + ">";
  return text + element;
}

Tensor readValueFile(const std::string& path, const ValueType& expected, const std::string& what) {
  return readValueBytes(readBytes(path, what), path, expected, what);
}

Tensor readValueBytes(const std::string& bytes, const std::string& path, const ValueType& expected,
                      const std::string& what) {
  const std::string where = what + " (" + path + ")";
  auto wrongMessage = [&] {
    fail(what + " is " + describeValueType(expected) + "; " + path + " holds " +
         messageKind(bytes) + ", not " + messageName(expected));
  };
  if (expected.isOptional) {
    onnx::OptionalProto proto;
    if (!parsesAs(proto, bytes) || !proto.has_elem_type()) wrongMessage();
    return optionalFrom(proto, expected, where);
  }
  if (expected.isSequence) {
    onnx::SequenceProto proto;
    if (!parsesAs(proto, bytes) || !proto.has_elem_type()) wrongMessage();
    return sequenceFrom(proto, expected.dtype, where);
  }
  onnx::TensorProto proto;
  if (!parsesAs(proto, bytes) || !proto.has_data_type()) wrongMessage();
  return tensorFrom(proto, expected.dtype, where);
}

void writeValueFile(const std::string& path, const Tensor& value, const ValueType& type,
                    const std::string& name) {
  const bool isSequence =
      value.isSequence() || value.isNoneOfSequence() || (value.isNone() && type.isSequence);
  auto sequenceProto = [&](onnx::SequenceProto& proto) {
    proto.set_name(name);
    if (value.mapKeyType() != DataType::kUndefined) {
      proto.set_elem_type(onnx::SequenceProto::MAP);
      for (const Tensor& item : value.sequenceItems()) mapToProto(item, *proto.add_map_values());
      return;
    }
    proto.set_elem_type(onnx::SequenceProto::TENSOR);
    for (const Tensor& item : value.sequenceItems())
      tensorToProto(item, "", *proto.add_tensor_values());
  };
  std::string bytes;
  if (type.isOptional || value.isNone()) {
    onnx::OptionalProto proto;
    proto.set_name(name);
    if (value.isNone()) {
      proto.set_elem_type(onnx::OptionalProto::UNDEFINED);
    } else if (isSequence) {
      proto.set_elem_type(onnx::OptionalProto::SEQUENCE);
      sequenceProto(*proto.mutable_sequence_value());
    } else {
      proto.set_elem_type(onnx::OptionalProto::TENSOR);
      tensorToProto(value, "", *proto.mutable_tensor_value());
    }
    bytes = proto.SerializeAsString();
  } else if (isSequence) {
    onnx::SequenceProto proto;
    sequenceProto(proto);
    bytes = proto.SerializeAsString();
  } else {
    onnx::TensorProto proto;
    tensorToProto(value, name, proto);
    bytes = proto.SerializeAsString();
  }
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(ErrorCode::kRuntimeError, "cannot write '" + path + "'");
}

}  // namespace kiln::onnx_import
