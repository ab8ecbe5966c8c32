#include "onnx/qdq_model.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>

#include "kiln/error.h"
#include "onnx/graph_names.h"
#include "onnx/loader.h"
#include "onnx/model_file.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

namespace {

int64_t defaultOpset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
  return model.ir_version() < 3 ? 1 : 0;
}

void addInitializer(onnx::GraphProto& graph, const Tensor& value, const std::string& name) {
  tensorToProto(value, name, *graph.add_initializer());
}

Tensor parameters(const build::QdqPair& pair, bool scales) {
  const bool perAxis = pair.axis >= 0;
  const Shape shape = perAxis ? Shape{static_cast<int64_t>(pair.scales.size())} : Shape{};
  return scales ? Tensor::fromVector(DataType::kFloat32, shape, pair.scales)
                : Tensor::fromVector(DataType::kInt8, shape, pair.zeroPoints);
}

onnx::NodeProto qdqNode(const std::string& op, const std::string& name, const std::string& in,
                        const build::QdqPair& pair, const std::string& out) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_name(name);
  node.add_input(in);
  node.add_input(pair.scaleName);
  node.add_input(pair.zeroPointName);
  node.add_output(out);
  if (pair.axis >= 0) {
    onnx::AttributeProto* axis = node.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(pair.axis);
  }
  return node;
}

// Drops the float weights the int8 ones replaced, unless something still reads them (or they are
// graph inputs too), so the model does not hold the weights twice.
void removeReplacedWeights(const build::QuantizationPlan& plan, onnx::GraphProto& graph) {
  std::set<std::string> read, inputs;
  collectReadNames(graph, read);
  for (const onnx::ValueInfoProto& in : graph.input()) inputs.insert(in.name());
  std::set<std::string> replaced;
  for (const build::QdqPair& pair : plan.pairs)
    if (pair.weights.defined() && !read.count(pair.tensor) && !inputs.count(pair.tensor))
      replaced.insert(pair.tensor);
  auto* initializers = graph.mutable_initializer();
  for (int i = initializers->size() - 1; i >= 0; --i)
    if (replaced.count(initializers->Get(i).name())) initializers->DeleteSubrange(i, 1);
}

}  // namespace

void applyQuantizationPlan(const build::QuantizationPlan& plan, onnx::ModelProto& model) {
  const int64_t opset = defaultOpset(model);
  for (const build::QdqPair& pair : plan.pairs) {
    const int64_t needed = pair.axis >= 0 ? 13 : 10;
    if (opset < needed) {
      throw Error(
          ErrorCode::kInvalidArgument,
          "tensor '" + pair.tensor + "': " + (pair.axis >= 0 ? "per-channel " : "") +
              "QuantizeLinear/DequantizeLinear need ai.onnx opset " + std::to_string(needed) +
              ", the model has " + std::to_string(opset) +
              (pair.axis >= 0 ? " (quantize without --per-channel, or export with opset 13)" : ""));
    }
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  std::map<std::string, int> nodeIndex;  // by the name kiln gives it
  std::map<std::string, int> producer;   // tensor -> node index
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    nodeIndex[importedNodeName(node.name(), node.op_type(), i)] = i;
    for (const std::string& out : node.output()) producer[out] = i;
  }
  std::vector<onnx::NodeProto> first;                 // before every node: on inputs and weights
  std::map<int, std::vector<onnx::NodeProto>> after;  // after a node: on its outputs
  for (const build::QdqPair& pair : plan.pairs) {
    addInitializer(graph, parameters(pair, true), pair.scaleName);
    addInitializer(graph, parameters(pair, false), pair.zeroPointName);
    std::vector<onnx::NodeProto> nodes;
    if (pair.weights.defined()) {
      addInitializer(graph, pair.weights, pair.quantized);
    } else {
      nodes.push_back(
          qdqNode("QuantizeLinear", pair.quantizeNode, pair.tensor, pair, pair.quantized));
    }
    nodes.push_back(
        qdqNode("DequantizeLinear", pair.dequantizeNode, pair.quantized, pair, pair.dequantized));
    auto at = producer.find(pair.tensor);
    auto& where = pair.weights.defined() || at == producer.end() ? first : after[at->second];
    where.insert(where.end(), nodes.begin(), nodes.end());
    for (const auto& [name, slot] : pair.consumers) {
      auto it = nodeIndex.find(name);
      if (it == nodeIndex.end() || slot >= graph.node(it->second).input_size()) {
        throw Error(ErrorCode::kInvalidArgument, "quantization plan: the model has no node '" +
                                                     name + "' with input " + std::to_string(slot));
      }
      graph.mutable_node(it->second)->set_input(slot, pair.dequantized);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto& node : first) *nodes.Add() = std::move(node);
  for (int i = 0; i < graph.node_size(); ++i) {
    *nodes.Add() = std::move(*graph.mutable_node(i));
    if (auto it = after.find(i); it != after.end())
      for (onnx::NodeProto& node : it->second) *nodes.Add() = std::move(node);
  }
  graph.mutable_node()->Swap(&nodes);
  removeReplacedWeights(plan, graph);
}

void writeQdqModel(const std::string& modelPath, const build::QuantizationPlan& plan,
                   const std::string& outputPath) {
  onnx::ModelProto model = readModelProto(modelPath);
  applyQuantizationPlan(plan, model);
  writeModelProto(model, outputPath);
}

}  // namespace kiln::onnx_import
