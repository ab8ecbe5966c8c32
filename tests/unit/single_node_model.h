// Declarative single-operator tests: describe one node (op, opset, attributes, inputs and the
// output types) and run it through a Session, as in
//   auto out = SingleNodeModel("Col2Im", 18).input("x", x).input("image", shape).output("y").run();
#pragma once
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln::testing {

class SingleNodeModel {
 public:
  /// `domain` other than "" (e.g. "ai.onnx.ml") is imported at `opset`, next to ai.onnx 13.
  SingleNodeModel(const std::string& op, int64_t opset, const std::string& domain = "")
      : model_(makeModel(domain.empty() ? opset : 13)) {
    if (!domain.empty()) {
      auto* imp = model_.add_opset_import();
      imp->set_domain(domain);
      imp->set_version(opset);
    }
    node_ = model_.mutable_graph()->add_node();
    node_->set_domain(domain);
    node_->set_op_type(op);
    node_->set_name(op + "_under_test");
  }
  SingleNodeModel(const SingleNodeModel&) = delete;  // node_ points into model_
  SingleNodeModel& operator=(const SingleNodeModel&) = delete;

  SingleNodeModel& attr(const std::string& name, int64_t v) {
    auto* a = newAttr(name, onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  SingleNodeModel& attr(const std::string& name, float v) {
    auto* a = newAttr(name, onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  SingleNodeModel& attr(const std::string& name, const char* v) {
    auto* a = newAttr(name, onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  SingleNodeModel& attr(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  SingleNodeModel& attr(const std::string& name, const std::vector<float>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
    return *this;
  }
  SingleNodeModel& attr(const std::string& name, const std::vector<std::string>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::STRINGS);
    for (const auto& x : v) a->add_strings(x);
    return *this;
  }

  /// A graph input fed with `value` (its dtype and shape become the input's declared type).
  SingleNodeModel& input(const std::string& name, Tensor value) {
    node_->add_input(name);
    setValueInfo(model_.mutable_graph()->add_input(), name, static_cast<int>(value.dtype()),
                 value.shape());
    feeds_.emplace_back(name, std::move(value));
    return *this;
  }
  /// An omitted optional input ("").
  SingleNodeModel& skipInput() {
    node_->add_input("");
    return *this;
  }
  /// A node output that is also a graph output of the given dtype (shape left to inference).
  SingleNodeModel& output(const std::string& name, DataType dtype = DataType::kFloat32) {
    node_->add_output(name);
    auto* vi = model_.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(dtype));
    return *this;
  }

  /// Saves the model to a temp folder and runs it; returns the outputs in order.
  NamedTensors run() const {
    const auto dir = tempDir("single_node_" + node_->op_type());
    Session session(saveModel(model_, dir / "model.onnx"));
    return session.run(feeds_);
  }

 private:
  onnx::AttributeProto* newAttr(const std::string& name, onnx::AttributeProto::AttributeType type) {
    auto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  onnx::ModelProto model_;
  onnx::NodeProto* node_ = nullptr;
  NamedTensors feeds_;
};

template <typename T>
std::vector<T> valuesOf(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace kiln::testing
