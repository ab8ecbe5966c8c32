#include "build/layer_transaction.h"

#include <cstring>

#include "engine/api_guard.h"

namespace kiln {

LayerTransaction::LayerTransaction(NetworkDefinition::Impl& net, const std::string& type)
    : net_(net), valueMark_(net.graph.values.size()), nodeMark_(net.graph.nodes.size()) {
  record_.type = type;
  std::string base = type + "_" + std::to_string(net.layers.size());
  record_.name = base;
  // Layer names need not be unique, but defaults should not collide with tensor names.
  for (int k = 1; net.graph.findValue(record_.name + "_output") != ir::kNoValue; ++k) {
    record_.name = base + "_" + std::to_string(k);
  }
}

LayerTransaction::~LayerTransaction() {
  if (committed_) return;
  ir::Graph& g = net_.graph;
  for (size_t i = valueMark_; i < g.values.size(); ++i) {
    g.valueIds.erase(g.values[i].name);
    net_.tensorHandles.erase(static_cast<int>(i));
  }
  g.values.resize(valueMark_);
  g.nodes.resize(nodeMark_);
}

void LayerTransaction::fail(const std::string& message) const {
  throw Error(ErrorCode::kInvalidArgument,
              record_.type + " layer '" + record_.name + "': " + message);
}

int LayerTransaction::input(const ITensor& tensor) {
  int id = valueIdIn(net_.network, tensor);
  if (id < 0 || static_cast<size_t>(id) >= valueMark_)
    fail("an input tensor does not belong to this network");
  for (size_t i = 0; i < record_.inputs.size(); ++i)
    if (record_.inputs[i] == id) return id;
  record_.inputs.push_back(id);
  record_.inputSlots.emplace_back();
  return id;
}

int LayerTransaction::constant(const std::string& suffix, Tensor value) {
  int id = net_.graph.addValue(net_.uniqueName(record_.name + "_" + suffix),
                               ir::TypeInfo{value.dtype(), ir::symShapeOf(value.shape())});
  net_.graph.value(id).constant = std::move(value);
  return id;
}

std::vector<int> LayerTransaction::node(const std::string& opType, std::vector<int> inputs,
                                        ir::AttributeMap attrs, int numOutputs) {
  const int nodeIndex = static_cast<int>(net_.graph.nodes.size());
  ir::Node n;
  n.name = record_.name;
  n.opType = opType;
  n.opset = kNetworkOpset;
  n.attrs = std::move(attrs);
  for (size_t slot = 0; slot < inputs.size(); ++slot) {
    for (size_t k = 0; k < record_.inputs.size(); ++k) {
      if (record_.inputs[k] == inputs[slot])
        record_.inputSlots[k].emplace_back(nodeIndex, static_cast<int>(slot));
    }
  }
  n.inputs = std::move(inputs);
  for (int k = 0; k < numOutputs; ++k) {
    std::string base =
        record_.name + "_" + opType + (numOutputs > 1 ? "_" + std::to_string(k) : "");
    n.outputs.push_back(net_.graph.addValue(net_.uniqueName(base)));
  }
  net_.graph.nodes.push_back(std::move(n));
  record_.nodes.push_back(nodeIndex);
  return net_.graph.nodes.back().outputs;
}

ILayer* LayerTransaction::commit(std::vector<int> outputs) {
  ILayer* result = nullptr;
  (void)guardStatus(&net_.logger, [&] {
    ir::Graph& g = net_.graph;
    // Name the layer's results "<layer>_output[_i]"; intermediate values keep their op names.
    for (size_t k = 0; k < outputs.size(); ++k) {
      ir::Value& v = g.value(outputs[k]);
      if (static_cast<size_t>(outputs[k]) < valueMark_ || v.constant) continue;
      std::string wanted =
          record_.name + "_output" + (outputs.size() > 1 ? "_" + std::to_string(k) : "");
      if (g.findValue(wanted) == ir::kNoValue) {
        g.valueIds.erase(v.name);
        g.valueIds.emplace(wanted, outputs[k]);
        v.name = wanted;
      }
    }
    if (record_.nodes.size() > 1) {
      for (size_t k = 0; k < record_.nodes.size(); ++k) {
        g.nodes[static_cast<size_t>(record_.nodes[k])].name =
            record_.name + "_" + std::to_string(k);
      }
    }
    net_.refreshShapes();
    record_.outputs = std::move(outputs);
    record_.outputTypes.assign(record_.outputs.size(), DataType::kUndefined);
    net_.layers.push_back(std::move(record_));
    committed_ = true;
    result = net_.layer(static_cast<int>(net_.layers.size()) - 1);
  });
  return result;
}

Tensor tensorFromWeights(const Weights& weights, const Shape& shape, const std::string& what) {
  Tensor t(weights.type, shape);
  if (weights.count != t.numel()) {
    throw Error(ErrorCode::kInvalidArgument, what + " has " + std::to_string(weights.count) +
                                                 " values, needs " + std::to_string(t.numel()) +
                                                 " (shape " + shapeToString(shape) + ")");
  }
  if (weights.type == DataType::kString) {
    throw Error(ErrorCode::kInvalidArgument, what + ": string weights are not supported");
  }
  if (t.byteSize() && !weights.values)
    throw Error(ErrorCode::kInvalidArgument, what + ": values pointer is null");
  if (t.byteSize()) std::memcpy(t.raw(), weights.values, t.byteSize());
  return t;
}

}  // namespace kiln
