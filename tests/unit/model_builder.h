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

inline void addNode(onnx::ModelProto& model, const std::string& op, const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs, const std::string& name = "") {
  auto* node = model.mutable_graph()->add_node();
  node->set_op_type(op);
  node->set_name(name.empty() ? op + "_" + std::to_string(model.graph().node_size()) : name);
  for (const auto& i : inputs) node->add_input(i);
  for (const auto& o : outputs) node->add_output(o);
}

/// dims: >= 0 fixed, -1 symbolic named "N".
inline void setValueInfo(onnx::ValueInfoProto* vi, const std::string& name, int elemType, const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d >= 0) shape->add_dim()->set_dim_value(d);
    else shape->add_dim()->set_dim_param("N");
  }
}

inline void addInput(onnx::ModelProto& model, const std::string& name, const std::vector<int64_t>& dims,
                     int elemType = onnx::TensorProto::FLOAT) {
  setValueInfo(model.mutable_graph()->add_input(), name, elemType, dims);
}

inline void addOutput(onnx::ModelProto& model, const std::string& name, const std::vector<int64_t>& dims,
                      int elemType = onnx::TensorProto::FLOAT) {
  setValueInfo(model.mutable_graph()->add_output(), name, elemType, dims);
}

inline onnx::TensorProto* addFloatInitializer(onnx::ModelProto& model, const std::string& name,
                                              const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t;
}

/// A fresh empty folder under the system temp dir.
inline std::filesystem::path tempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_test_" + name + "_" + std::to_string(::getpid()));
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
