#include "onnx/model_check.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <map>
#include <set>

#include "ir/onnx_type_table.h"
#include "kiln/error.h"
#include "onnx/loader.h"
#include "onnx/model_file.h"
#include "onnx/node_schema_check.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& name) { return "'" + name + "'"; }

class ModelChecker {
 public:
  ModelChecker(const onnx::ModelProto& model, std::string baseDir)
      : model_(model), baseDir_(std::move(baseDir)) {}

  std::vector<ModelProblem> run() {
    checkHeader();
    checkGraph(model_.graph(), {}, "", true);
    return std::move(problems_);
  }

 private:
  void add(const std::string& rule, const std::string& message) {
    problems_.push_back({rule, message});
  }
  void checkHeader();
  void checkGraph(const onnx::GraphProto& graph, const std::set<std::string>& outer,
                  const std::string& scope, bool isMain);
  void checkTensor(const onnx::TensorProto& tensor, const std::string& where);
  void checkValueInfo(const onnx::ValueInfoProto& info, const std::string& where, bool needsType);
  void checkOrder(const onnx::GraphProto& graph, const std::set<std::string>& defined,
                  const std::string& scope);
  std::set<int> nodesInCycles(const onnx::GraphProto& graph,
                              const std::map<std::string, int>& producer) const;

  const onnx::ModelProto& model_;
  std::string baseDir_;
  std::map<std::string, int64_t> opsets_;
  std::vector<ModelProblem> problems_;
};

void ModelChecker::checkHeader() {
  if (!model_.has_ir_version() || model_.ir_version() <= 0) {
    add("ir-version", "the model has no ir_version");
  } else if (model_.ir_version() > ir::kOnnxLatestIrVersion) {
    add("ir-version", "ir_version " + std::to_string(model_.ir_version()) +
                          " is newer than the newest kiln knows (" +
                          std::to_string(ir::kOnnxLatestIrVersion) + ")");
  }
  for (const onnx::OperatorSetIdProto& op : model_.opset_import()) {
    const std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    const std::string shown = domain.empty() ? "ai.onnx" : domain;
    if (!opsets_.emplace(domain, op.version()).second)
      add("opset-import", "domain '" + shown + "' is imported twice");
    if (op.version() < 1)
      add("opset-import",
          "domain '" + shown + "' is imported at version " + std::to_string(op.version()));
    if (domain.empty() && op.version() > ir::kOnnxLatestOpset) {
      add("opset-import", "ai.onnx opset " + std::to_string(op.version()) +
                              " is newer than the newest ONNX opset kiln knows (" +
                              std::to_string(ir::kOnnxLatestOpset) + ")");
    }
  }
  if (model_.opset_import_size() == 0) {
    if (model_.ir_version() >= 3)
      add("opset-import", "the model imports no opset (opset_import is empty)");
    else
      opsets_[""] = 1;
  }
}

void ModelChecker::checkTensor(const onnx::TensorProto& tensor, const std::string& where) {
  try {
    tensorFromProto(tensor, baseDir_, where);
  } catch (const Error& e) {
    const bool external =
        tensor.has_data_location() && tensor.data_location() == onnx::TensorProto::EXTERNAL;
    add(external ? "external-data" : "tensor-data", e.what());
  }
}

void ModelChecker::checkValueInfo(const onnx::ValueInfoProto& info, const std::string& where,
                                  bool needsType) {
  if (!info.has_type()) {
    if (needsType) add("type", where + " has no type");
    return;
  }
  const onnx::TypeProto& type = info.type();
  if (type.has_tensor_type()) {
    const int elem = type.tensor_type().elem_type();
    if (elem == onnx::TensorProto::UNDEFINED)
      add("type", where + " has no element type (elem_type is 0)");
    else if (elem < 0 || elem > ir::kOnnxLatestDataType)
      add("type",
          where + " has element type " + std::to_string(elem) + ", which ONNX does not define");
  } else if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) {
    if (needsType) add("type", where + " has an empty type");
  }
}

// Nodes that cannot be ordered: those left when Kahn's algorithm has taken every node it can.
std::set<int> ModelChecker::nodesInCycles(const onnx::GraphProto& graph,
                                          const std::map<std::string, int>& producer) const {
  const int n = graph.node_size();
  std::vector<std::vector<int>> consumers(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    std::set<int> from;
    for (const std::string& in : graph.node(i).input()) {
      auto it = producer.find(in);
      if (it != producer.end()) from.insert(it->second);
    }
    for (int p : from) consumers[p].push_back(i);
    pending[i] = static_cast<int>(from.size());
  }
  std::vector<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(i);
  std::set<int> left;
  for (int i = 0; i < n; ++i) left.insert(i);
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    left.erase(i);
    for (int c : consumers[i])
      if (--pending[c] == 0) ready.push_back(c);
  }
  return left;
}

// Every node input must be defined before the node: by an enclosing scope, a graph input, an
// initializer or an earlier node (onnx.checker requires topological order; kiln would sort).
void ModelChecker::checkOrder(const onnx::GraphProto& graph, const std::set<std::string>& defined,
                              const std::string& scope) {
  std::map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string& out : graph.node(i).output())
      if (!out.empty()) producer.emplace(out, i);
  const std::set<int> cyclic = nodesInCycles(graph, producer);
  auto label = [&](int i) {
    const onnx::NodeProto& node = graph.node(i);
    return scope + "node '" + importedNodeName(node.name(), node.op_type(), i) + "' (" +
           node.op_type() + ")";
  };
  if (!cyclic.empty()) {
    std::string names;
    int shown = 0;
    for (int i : cyclic) {
      if (shown++ == 8) {
        names += ", ...";
        break;
      }
      names += (names.empty() ? "" : ", ") + label(i);
    }
    add("cycle", std::to_string(cyclic.size()) + " nodes form or depend on a cycle: " + names);
  }
  std::set<std::string> available = defined;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (int k = 0; k < node.input_size(); ++k) {
      const std::string& in = node.input(k);
      if (in.empty() || available.count(in)) continue;
      auto it = producer.find(in);
      const std::string where = label(i) + " input " + std::to_string(k) + " " + quoted(in);
      if (it == producer.end()) {
        add("undefined-input", where + " is not produced by any node, initializer or graph input");
      } else if (!cyclic.count(i)) {
        add("topological-order", where + " is produced by a later node, " + label(it->second) +
                                     " (nodes must be in topological order)");
      }
    }
    for (const std::string& out : node.output())
      if (!out.empty()) available.insert(out);
  }
}

void ModelChecker::checkGraph(const onnx::GraphProto& graph, const std::set<std::string>& outer,
                              const std::string& scope, bool isMain) {
  if (graph.name().empty())
    add("graph", scope + (isMain ? "the graph" : "the subgraph") + " has no name");
  std::set<std::string> defined = outer;  // names are unique across a graph and its enclosing ones
  auto define = [&](const std::string& name, const std::string& what) {
    if (!defined.insert(name).second)
      add("unique-names", scope + "tensor " + quoted(name) + " is defined again as " + what);
  };
  std::map<std::string, int> initializerTypes;
  for (const onnx::TensorProto& init : graph.initializer()) {
    const std::string where = scope + "initializer " + quoted(init.name());
    if (init.name().empty()) {
      add("unique-names", scope + "an initializer has no name");
      continue;
    }
    define(init.name(), "an initializer");
    initializerTypes[init.name()] = init.data_type();
    checkTensor(init, where);
  }
  for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
    define(sparse.values().name(), "a sparse initializer");
    initializerTypes[sparse.values().name()] = sparse.values().data_type();
  }
  std::set<std::string> inputs;
  for (const onnx::ValueInfoProto& in : graph.input()) {
    const std::string where = scope + "graph input " + quoted(in.name());
    if (in.name().empty()) add("unique-names", scope + "a graph input has no name");
    if (!inputs.insert(in.name()).second)
      add("unique-names", where + " is listed twice");
    else if (!initializerTypes.count(in.name()))
      define(in.name(), "a graph input");
    checkValueInfo(in, where, isMain);
    auto init = initializerTypes.find(in.name());
    if (init != initializerTypes.end() && in.type().has_tensor_type() &&
        in.type().tensor_type().elem_type() != 0 &&
        in.type().tensor_type().elem_type() != init->second) {
      add("type", where + " is declared " +
                      dataTypeName(static_cast<DataType>(in.type().tensor_type().elem_type())) +
                      " but its initializer holds " +
                      dataTypeName(static_cast<DataType>(init->second)));
    }
  }
  for (const onnx::ValueInfoProto& vi : graph.value_info())
    checkValueInfo(vi, scope + "value_info " + quoted(vi.name()), false);
  const std::set<std::string> beforeNodes = defined;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const std::string label = scope + "node '" + importedNodeName(node.name(), node.op_type(), i) +
                              "' (" + node.op_type() + ")";
    for (const std::string& out : node.output())
      if (!out.empty()) define(out, "an output of " + label);
    if (node.op_type().empty()) add("operator-schema", label + " has no op_type");
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto opset = opsets_.find(domain);
    if (opset == opsets_.end()) {
      add("opset-import", label + " uses domain '" + (domain.empty() ? "ai.onnx" : domain) +
                              "', which the model does not import (opset_import)");
    } else {
      checkNodeSchema(node, label, opset->second, problems_);
    }
  }
  for (int i = 0; i < graph.node_size(); ++i) {  // subgraphs see every name of this graph
    const onnx::NodeProto& node = graph.node(i);
    const std::string label = scope + "node '" + importedNodeName(node.name(), node.op_type(), i) +
                              "' (" + node.op_type() + ")";
    for (const onnx::AttributeProto& a : node.attribute()) {
      const std::string where = label + " attribute " + quoted(a.name());
      if (a.has_t()) checkTensor(a.t(), where);
      for (const onnx::TensorProto& t : a.tensors()) checkTensor(t, where);
      if (a.has_g()) checkGraph(a.g(), defined, where + " > ", false);
      for (const onnx::GraphProto& g : a.graphs()) checkGraph(g, defined, where + " > ", false);
    }
  }
  checkOrder(graph, beforeNodes, scope);
  std::set<std::string> outputs;
  for (const onnx::ValueInfoProto& out : graph.output()) {
    const std::string where = scope + "graph output " + quoted(out.name());
    if (!outputs.insert(out.name()).second) add("unique-names", where + " is listed twice");
    if (!defined.count(out.name()))
      add("graph-output", where + " is not produced by any node, initializer or input");
    checkValueInfo(out, where, isMain);
  }
}

}  // namespace

std::vector<ModelProblem> checkModelFile(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error(ErrorCode::kIoError, path + ": is a directory, not a model file");
  const onnx::ModelProto model = readModelProto(path);
  const fs::path dir = fs::path(path).parent_path();
  return ModelChecker(model, dir.empty() ? "." : dir.string()).run();
}

}  // namespace kiln::onnx_import
