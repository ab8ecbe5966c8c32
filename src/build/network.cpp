// NetworkDefinition: tensors, layers and shape bookkeeping. The add* methods are in
// network_layers.cpp.
#include <algorithm>

#include "build/layer_transaction.h"
#include "build/network_impl.h"
#include "engine/api_guard.h"
#include "ir/op_schema.h"

namespace kiln {

ITensor* NetworkDefinition::Impl::tensor(int valueId) {
  auto& handle = tensorHandles[valueId];
  if (!handle) handle = std::make_unique<NetworkTensor>(network, valueId);
  return handle.get();
}

ILayer* NetworkDefinition::Impl::layer(int index) {
  while (layerHandles.size() <= static_cast<size_t>(index)) {
    layerHandles.push_back(
        std::make_unique<NetworkLayer>(network, static_cast<int>(layerHandles.size())));
  }
  return layerHandles[static_cast<size_t>(index)].get();
}

std::string NetworkDefinition::Impl::uniqueName(const std::string& base) const {
  std::string name = base;
  for (int k = 1; graph.findValue(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
  return name;
}

void NetworkDefinition::Impl::refreshShapes() {
  // Inference runs on a sorted copy (setInput may have made the order stale); value ids are shared.
  ir::Graph copy = graph;
  for (const ir::Node& node : copy.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) copy.value(id).type = ir::TypeInfo{};
  ir::sortTopologically(copy);
  ir::inferShapes(copy);
  for (const ir::Node& node : copy.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) graph.value(id).type = copy.value(id).type;
}

void NetworkDefinition::Impl::adoptGraph(ir::Graph imported, std::string sourceName) {
  graph = std::move(imported);
  source = std::move(sourceName);
  layers.clear();
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = graph.nodes[i];
    LayerRecord rec;
    rec.name = node.name;
    rec.type = node.opType;
    rec.nodes = {static_cast<int>(i)};
    for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
      if (node.inputs[slot] == ir::kNoValue) continue;
      rec.inputs.push_back(node.inputs[slot]);
      rec.inputSlots.push_back({{static_cast<int>(i), static_cast<int>(slot)}});
    }
    for (int id : node.outputs)
      if (id != ir::kNoValue) rec.outputs.push_back(id);
    rec.outputTypes.assign(rec.outputs.size(), DataType::kUndefined);
    layers.push_back(std::move(rec));
  }
}

NetworkDefinition::NetworkDefinition(ILogger& logger)
    : impl_(std::make_unique<Impl>(*this, logger)) {}
NetworkDefinition::~NetworkDefinition() = default;

ILogger& NetworkDefinition::logger() const { return impl_->logger; }

ITensor* NetworkDefinition::addInput(const std::string& name, DataType type, const Shape& dims) {
  ITensor* result = nullptr;
  (void)guardStatus(&impl_->logger, [&] {
    if (name.empty()) throw Error(ErrorCode::kInvalidArgument, "addInput: the input needs a name");
    if (!isSupportedDataType(type) || type == DataType::kUndefined) {
      throw Error(ErrorCode::kInvalidArgument,
                  "addInput '" + name + "': data type " + dataTypeName(type) + " is not supported");
    }
    ir::SymShape shape;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < -1) {
        throw Error(ErrorCode::kInvalidArgument,
                    "addInput '" + name + "': dim " + std::to_string(i) + " is " +
                        std::to_string(dims[i]) + "; use -1 for a dynamic dim");
      }
      shape.push_back(dims[i] >= 0 ? ir::Dim::known(dims[i]) : ir::Dim::unknown());
    }
    int id = impl_->graph.addValue(name, ir::TypeInfo{type, std::move(shape)});
    impl_->graph.inputs.push_back(id);
    result = impl_->tensor(id);
  });
  return result;
}

Status NetworkDefinition::markOutput(ITensor& tensor) {
  return guardStatus(&impl_->logger, [&] {
    const int id = valueIdIn(*this, tensor);
    if (id < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "markOutput: the tensor is not a tensor of this network");
    auto& outs = impl_->graph.outputs;
    if (std::find(outs.begin(), outs.end(), id) == outs.end()) outs.push_back(id);
  });
}

int NetworkDefinition::getNbInputs() const { return static_cast<int>(impl_->graph.inputs.size()); }
ITensor* NetworkDefinition::getInput(int index) const {
  if (index < 0 || index >= getNbInputs()) return nullptr;
  return impl_->tensor(impl_->graph.inputs[static_cast<size_t>(index)]);
}
int NetworkDefinition::getNbOutputs() const {
  return static_cast<int>(impl_->graph.outputs.size());
}
ITensor* NetworkDefinition::getOutput(int index) const {
  if (index < 0 || index >= getNbOutputs()) return nullptr;
  return impl_->tensor(impl_->graph.outputs[static_cast<size_t>(index)]);
}
int NetworkDefinition::getNbLayers() const { return static_cast<int>(impl_->layers.size()); }
ILayer* NetworkDefinition::getLayer(int index) const {
  if (index < 0 || index >= getNbLayers()) return nullptr;
  return impl_->layer(index);
}

// NetworkTensor

int valueIdIn(const NetworkDefinition& network, const ITensor& tensor) {
  const auto* own = dynamic_cast<const NetworkTensor*>(&tensor);
  return own && &own->network() == &network ? own->valueId() : -1;
}

const std::string& NetworkTensor::getName() const {
  return network_.impl().graph.value(valueId_).name;
}

Status NetworkTensor::setName(const std::string& name) {
  auto& impl = network_.impl();
  return guardStatus(&impl.logger, [&] {
    ir::Graph& g = impl.graph;
    ir::Value& v = g.value(valueId_);
    if (name == v.name) return;
    if (name.empty())
      throw Error(ErrorCode::kInvalidArgument, "tensor '" + v.name + "': a name cannot be empty");
    if (g.findValue(name) != ir::kNoValue) {
      throw Error(ErrorCode::kInvalidArgument,
                  "cannot rename tensor '" + v.name + "' to '" + name + "': the name is taken");
    }
    g.valueIds.erase(v.name);
    g.valueIds.emplace(name, valueId_);
    v.name = name;
  });
}

Shape NetworkTensor::getDimensions() const {
  const auto& type = network_.impl().graph.value(valueId_).type;
  Shape dims;
  if (type.shape)
    for (const ir::Dim& d : *type.shape) dims.push_back(d.isKnown() ? d.value : -1);
  return dims;
}

bool NetworkTensor::hasShape() const {
  return network_.impl().graph.value(valueId_).type.shape.has_value();
}
DataType NetworkTensor::getType() const { return network_.impl().graph.value(valueId_).type.dtype; }
bool NetworkTensor::isNetworkInput() const { return network_.impl().graph.isGraphInput(valueId_); }
bool NetworkTensor::isNetworkOutput() const {
  const auto& outs = network_.impl().graph.outputs;
  return std::find(outs.begin(), outs.end(), valueId_) != outs.end();
}

// NetworkLayer

LayerRecord& NetworkLayer::record() const {
  return network_.impl().layers.at(static_cast<size_t>(index_));
}

const std::string& NetworkLayer::getName() const { return record().name; }

void NetworkLayer::setName(const std::string& name) {
  LayerRecord& rec = record();
  rec.name = name;
  auto& nodes = network_.impl().graph.nodes;
  for (size_t k = 0; k < rec.nodes.size(); ++k) {
    nodes[static_cast<size_t>(rec.nodes[k])].name =
        rec.nodes.size() == 1 ? name : name + "_" + std::to_string(k);
  }
}

const std::string& NetworkLayer::getType() const { return record().type; }
int NetworkLayer::getNbInputs() const { return static_cast<int>(record().inputs.size()); }
ITensor* NetworkLayer::getInput(int index) const {
  const LayerRecord& rec = record();
  if (index < 0 || index >= static_cast<int>(rec.inputs.size())) return nullptr;
  return network_.impl().tensor(rec.inputs[static_cast<size_t>(index)]);
}

Status NetworkLayer::setInput(int index, ITensor& tensor) {
  auto& impl = network_.impl();
  LayerRecord& rec = record();
  if (index < 0 || index >= static_cast<int>(rec.inputs.size())) {
    return Status(ErrorCode::kInvalidArgument,
                  "layer '" + rec.name + "' has no input " + std::to_string(index));
  }
  const int old = rec.inputs[static_cast<size_t>(index)];
  auto assign = [&](int id) {
    rec.inputs[static_cast<size_t>(index)] = id;
    for (auto [node, slot] : rec.inputSlots[static_cast<size_t>(index)]) {
      impl.graph.nodes[static_cast<size_t>(node)].inputs[static_cast<size_t>(slot)] = id;
    }
  };
  const int id = valueIdIn(network_, tensor);
  if (id < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "layer '" + rec.name + "': the new input is not a tensor of this network");
  assign(id);
  Status status = guardStatus(&impl.logger, [&] { impl.refreshShapes(); });
  if (!status.ok()) {
    assign(old);
    (void)guardStatus(nullptr, [&] { impl.refreshShapes(); });
  }
  return status;
}

int NetworkLayer::getNbOutputs() const { return static_cast<int>(record().outputs.size()); }
ITensor* NetworkLayer::getOutput(int index) const {
  const LayerRecord& rec = record();
  if (index < 0 || index >= static_cast<int>(rec.outputs.size())) return nullptr;
  return network_.impl().tensor(rec.outputs[static_cast<size_t>(index)]);
}

void NetworkLayer::setPrecision(DataType type) {
  LayerRecord& rec = record();
  rec.precision = type;
  rec.precisionSet = true;
}
DataType NetworkLayer::getPrecision() const { return record().precision; }
bool NetworkLayer::precisionIsSet() const { return record().precisionSet; }
void NetworkLayer::resetPrecision() {
  LayerRecord& rec = record();
  rec.precision = DataType::kFloat32;
  rec.precisionSet = false;
}

void NetworkLayer::setOutputType(int index, DataType type) {
  LayerRecord& rec = record();
  if (index >= 0 && index < static_cast<int>(rec.outputTypes.size()))
    rec.outputTypes[static_cast<size_t>(index)] = type;
}

DataType NetworkLayer::getOutputType(int index) const {
  const LayerRecord& rec = record();
  if (index < 0 || index >= static_cast<int>(rec.outputs.size())) return DataType::kUndefined;
  DataType set = rec.outputTypes[static_cast<size_t>(index)];
  return set != DataType::kUndefined
             ? set
             : network_.impl().graph.value(rec.outputs[static_cast<size_t>(index)]).type.dtype;
}

}  // namespace kiln
