// Builds small ONNX models in tests with the protobuf API.
#pragma once
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::testing {

inline onnx::ModelProto makeModel(int64_t opset = 13) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln-tests");
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model.mutable_graph()->set_name("test");
  return model;
}

inline void addNode(onnx::ModelProto& model, const std::string& op,
                    const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                    const std::string& name = "") {
  auto* node = model.mutable_graph()->add_node();
  node->set_op_type(op);
  node->set_name(name.empty() ? op + "_" + std::to_string(model.graph().node_size()) : name);
  for (const auto& i : inputs) node->add_input(i);
  for (const auto& o : outputs) node->add_output(o);
}

/// dims: >= 0 fixed, -1 symbolic named "N".
inline void setValueInfo(onnx::ValueInfoProto* vi, const std::string& name, int elemType,
                         const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d >= 0)
      shape->add_dim()->set_dim_value(d);
    else
      shape->add_dim()->set_dim_param("N");
  }
}

inline void addInput(onnx::ModelProto& model, const std::string& name,
                     const std::vector<int64_t>& dims, int elemType = onnx::TensorProto::FLOAT) {
  setValueInfo(model.mutable_graph()->add_input(), name, elemType, dims);
}

inline void addOutput(onnx::ModelProto& model, const std::string& name,
                      const std::vector<int64_t>& dims, int elemType = onnx::TensorProto::FLOAT) {
  setValueInfo(model.mutable_graph()->add_output(), name, elemType, dims);
}

inline onnx::TensorProto* addFloatInitializer(onnx::ModelProto& model, const std::string& name,
                                              const std::vector<int64_t>& dims,
                                              const std::vector<float>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t;
}

/// A 1-D int64 initializer (shapes, axes, pads).
inline onnx::TensorProto* addInt64Initializer(onnx::ModelProto& model, const std::string& name,
                                              const std::vector<int64_t>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return t;
}

/// The node added last, to give it attributes.
inline onnx::NodeProto* lastNode(onnx::ModelProto& model) {
  return model.mutable_graph()->mutable_node(model.graph().node_size() - 1);
}

inline void setInt(onnx::NodeProto* node, const std::string& name, int64_t value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

inline void setInts(onnx::NodeProto* node, const std::string& name,
                    const std::vector<int64_t>& values) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

inline void setFloat(onnx::NodeProto* node, const std::string& name, float value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

/// A fresh empty folder under the system temp dir.
inline std::filesystem::path tempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string saveModel(const onnx::ModelProto& model, const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary);
  model.SerializeToOstream(&out);
  return path.string();
}

inline void writeBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace kiln::testing
