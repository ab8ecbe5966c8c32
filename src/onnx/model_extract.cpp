#include "onnx/model_extract.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "ir/shape_inference_report.h"
#include "kiln/error.h"
#include "onnx/graph_names.h"
#include "onnx/loader.h"
#include "onnx/model_file.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

namespace {

namespace fs = std::filesystem;

void typeToProto(const ir::TypeInfo& type, onnx::TypeProto& proto) {
  onnx::TypeProto* tensor = &proto;
  if (type.isOptional) tensor = proto.mutable_optional_type()->mutable_elem_type();
  if (type.isSequence) tensor = tensor->mutable_sequence_type()->mutable_elem_type();
  tensor->mutable_tensor_type()->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape || type.isSequence) return;
  onnx::TensorShapeProto* shape = tensor->mutable_tensor_type()->mutable_shape();
  for (const ir::Dim& d : *type.shape) {
    onnx::TensorShapeProto::Dimension* dim = shape->add_dim();
    if (d.isKnown())
      dim->set_dim_value(d.value);
    else if (!d.symbol.empty())
      dim->set_dim_param(d.symbol);
  }
}

class Extractor {
 public:
  Extractor(std::string modelPath, onnx::ModelProto model)
      : path_(std::move(modelPath)), model_(std::move(model)), graph_(model_.graph()) {
    const fs::path dir = fs::path(path_).parent_path();
    baseDir_ = dir.empty() ? "." : dir.string();
    for (int i = 0; i < graph_.node_size(); ++i)
      for (const std::string& out : graph_.node(i).output())
        if (!out.empty()) producer_.emplace(out, i);
    for (int i = 0; i < graph_.initializer_size(); ++i)
      initializers_.emplace(graph_.initializer(i).name(), i);
    for (const onnx::ValueInfoProto& vi : graph_.input()) {
      declared_[vi.name()] = &vi;
      graphInputs_.insert(vi.name());
    }
    for (const onnx::ValueInfoProto& vi : graph_.value_info()) declared_.emplace(vi.name(), &vi);
    for (const onnx::ValueInfoProto& vi : graph_.output()) declared_.emplace(vi.name(), &vi);
  }

  onnx::ModelProto extract(const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs);
  /// Moves the external data of the sub-model's tensors into one file beside it.
  void writeExternalData(onnx::ModelProto& sub, const std::string& outputPath) const;

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(ErrorCode::kInvalidArgument, path_ + ": " + message);
  }
  bool isTensor(const std::string& name) const {
    return producer_.count(name) || initializers_.count(name) || graphInputs_.count(name);
  }
  void collectNeeded(const std::set<std::string>& inputs, const std::vector<std::string>& outputs);
  onnx::ValueInfoProto valueInfo(const std::string& name);
  std::vector<int> sortedNodes() const;

  std::string path_;
  std::string baseDir_;
  onnx::ModelProto model_;
  const onnx::GraphProto& graph_;
  std::map<std::string, int> producer_, initializers_;
  std::set<std::string> graphInputs_;
  std::map<std::string, const onnx::ValueInfoProto*> declared_;
  std::set<int> nodes_;                     // kept, by index in the model
  std::set<std::string> initializerNames_;  // kept
  std::optional<ir::Model>
      inferred_;  // the model as kiln loads it, with inferred shapes (when needed)
};

// Walks back from the outputs to the inputs: the nodes and initializers on the way are kept; a
// graph input of the model reached on the way is a tensor the outputs need but were not given.
void Extractor::collectNeeded(const std::set<std::string>& inputs,
                              const std::vector<std::string>& outputs) {
  for (const std::string& output : outputs) {
    std::vector<std::string> pending{output};
    std::set<std::string> seen;
    while (!pending.empty()) {
      const std::string name = pending.back();
      pending.pop_back();
      if (name.empty() || inputs.count(name) || !seen.insert(name).second) continue;
      if (auto it = producer_.find(name); it != producer_.end()) {
        if (!nodes_.insert(it->second).second) continue;  // its inputs are already on the way
        const onnx::NodeProto& node = graph_.node(it->second);
        pending.insert(pending.end(), node.input().begin(), node.input().end());
        for (const std::string& outer : outerScopeReads(node)) pending.push_back(outer);
      } else if (initializers_.count(name)) {
        initializerNames_.insert(name);
      } else if (graphInputs_.count(name)) {
        fail("output '" + output + "' cannot be computed from the given inputs: it needs tensor '" +
             name + "', a graph input of the model (add it to --inputs)");
      } else {
        fail("output '" + output + "' cannot be computed: tensor '" + name +
             "' is not defined in the model");
      }
    }
  }
}

// The kept nodes in topological order, each as early as the model has it (kiln loads models whose
// nodes are out of order; onnx.checker and other runtimes need the order).
std::vector<int> Extractor::sortedNodes() const {
  std::map<int, std::set<int>> waitsFor;  // node -> kept nodes whose outputs it reads
  std::map<int, std::vector<int>> readers;
  for (int i : nodes_) {
    std::set<std::string> reads(graph_.node(i).input().begin(), graph_.node(i).input().end());
    for (const std::string& outer : outerScopeReads(graph_.node(i))) reads.insert(outer);
    for (const std::string& name : reads) {
      auto it = producer_.find(name);
      if (it != producer_.end() && nodes_.count(it->second) && it->second != i &&
          waitsFor[i].insert(it->second).second)
        readers[it->second].push_back(i);
    }
  }
  std::set<int> ready;
  for (int i : nodes_)
    if (waitsFor[i].empty()) ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int r : readers[i]) {
      waitsFor[r].erase(i);
      if (waitsFor[r].empty()) ready.insert(r);
    }
  }
  if (order.size() != nodes_.size()) fail("the nodes computing the outputs form a cycle");
  return order;
}

// A tensor's declared type, else its initializer's, else the one kiln infers.
onnx::ValueInfoProto Extractor::valueInfo(const std::string& name) {
  if (auto it = declared_.find(name); it != declared_.end() && it->second->has_type())
    return *it->second;
  onnx::ValueInfoProto info;
  info.set_name(name);
  if (auto it = initializers_.find(name); it != initializers_.end()) {
    const onnx::TensorProto& init = graph_.initializer(it->second);
    auto* tensor = info.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(init.data_type());
    tensor->mutable_shape();
    for (int64_t d : init.dims()) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    return info;
  }
  if (!inferred_) {
    inferred_ = loadModel(path_);
    ir::inferShapesCollectingErrors(inferred_->graph);  // the tensors after a failure stay unknown
  }
  const int id = inferred_->graph.findValue(name);
  if (id == ir::kNoValue || inferred_->graph.value(id).type.dtype == DataType::kUndefined) {
    fail("tensor '" + name +
         "' has no declared type and kiln cannot infer one; declare it in the model's value_info");
  }
  typeToProto(inferred_->graph.value(id).type, *info.mutable_type());
  return info;
}

onnx::ModelProto Extractor::extract(const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs) {
  if (outputs.empty()) fail("no outputs to extract");
  for (const auto* names : {&inputs, &outputs})
    for (const std::string& name : *names)
      if (!isTensor(name)) fail("tensor '" + name + "' is not in the model");
  const std::set<std::string> given(inputs.begin(), inputs.end());
  collectNeeded(given, outputs);
  // The model's header (opsets, metadata, local functions) without copying its graph.
  onnx::GraphProto* whole = model_.release_graph();
  onnx::ModelProto sub = model_;
  model_.set_allocated_graph(whole);
  onnx::GraphProto& graph = *sub.mutable_graph();
  graph.set_name(graph_.name());
  graph.set_doc_string(graph_.doc_string());
  std::set<std::string> used;  // every name the kept nodes read or write
  for (int i : sortedNodes()) {
    const onnx::NodeProto& node = graph_.node(i);
    *graph.add_node() = node;
    used.insert(node.input().begin(), node.input().end());
    used.insert(node.output().begin(), node.output().end());
  }
  for (const std::string& name : initializerNames_)
    *graph.add_initializer() = graph_.initializer(initializers_.at(name));
  std::set<std::string> ends;
  for (const std::string& name : inputs) {
    if (ends.insert(name).second) *graph.add_input() = valueInfo(name);
  }
  std::set<std::string> written;
  for (const std::string& name : outputs) {
    if (written.insert(name).second) *graph.add_output() = valueInfo(name);
    ends.insert(name);
  }
  for (const onnx::ValueInfoProto& vi : graph_.value_info())
    if (used.count(vi.name()) && !ends.count(vi.name())) *graph.add_value_info() = vi;
  return sub;
}

// Every tensor of the graph stored as external data: initializers and attribute tensors, at any
// depth.
void collectExternalTensors(onnx::GraphProto& graph, std::vector<onnx::TensorProto*>& out) {
  auto external = [](const onnx::TensorProto& t) {
    return t.has_data_location() && t.data_location() == onnx::TensorProto::EXTERNAL;
  };
  for (onnx::TensorProto& t : *graph.mutable_initializer())
    if (external(t)) out.push_back(&t);
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_t() && external(a.t())) out.push_back(a.mutable_t());
      for (onnx::TensorProto& t : *a.mutable_tensors())
        if (external(t)) out.push_back(&t);
      if (a.has_g()) collectExternalTensors(*a.mutable_g(), out);
      for (onnx::GraphProto& g : *a.mutable_graphs()) collectExternalTensors(g, out);
    }
  }
}

void Extractor::writeExternalData(onnx::ModelProto& sub, const std::string& outputPath) const {
  std::vector<onnx::TensorProto*> tensors;
  collectExternalTensors(*sub.mutable_graph(), tensors);
  if (tensors.empty()) return;
  const std::string dataPath = outputPath + ".data";
  const std::string location = fs::path(dataPath).filename().string();
  std::ofstream out(dataPath, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorCode::kIoError, dataPath + ": cannot write the external data file");
  uint64_t offset = 0;
  for (onnx::TensorProto* proto : tensors) {
    // Read (and checked) where the original model keeps it, then stored as the file format wants.
    onnx::TensorProto stored;
    tensorToProto(tensorFromProto(*proto, baseDir_, path_ + ": tensor '" + proto->name() + "'"),
                  proto->name(), stored);
    const std::string& bytes = stored.raw_data();
    const uint64_t aligned =
        (offset + 63) / 64 * 64;  // as onnx's own writer, keep each tensor aligned
    out << std::string(aligned - offset, '\0');
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    proto->clear_external_data();
    proto->clear_raw_data();
    for (const auto& [key, value] : {std::pair<const char*, std::string>{"location", location},
                                     {"offset", std::to_string(aligned)},
                                     {"length", std::to_string(bytes.size())}}) {
      onnx::StringStringEntryProto* entry = proto->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    }
    offset = aligned + bytes.size();
  }
  if (!out.flush())
    throw Error(ErrorCode::kIoError, dataPath + ": cannot write the external data file");
}

}  // namespace

void extractModel(const std::string& modelPath, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs, const std::string& outputPath) {
  Extractor extractor(modelPath, readModelProto(modelPath));
  onnx::ModelProto sub = extractor.extract(inputs, outputs);
  extractor.writeExternalData(sub, outputPath);
  writeModelProto(sub, outputPath);
}

}  // namespace kiln::onnx_import
