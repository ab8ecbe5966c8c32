// getLayerParams / setLayerParams (include/kiln/layer_params.h): changing a layer's parameters
// after it is made, as TensorRT's typed-layer setters do. The layer is added anew with the new
// parameters (so every check of its add* method applies), then takes the place of the old one:
// the new nodes produce the old output tensors, the old nodes are removed, and the record keeps
// its index, name and handles.
#include <algorithm>

#include "build/network_impl.h"
#include "engine/api_guard.h"

namespace kiln {

void ForwardingLogger::log(Severity severity, const std::string& message) noexcept {
  if (severity <= Severity::kERROR) {
    std::lock_guard<std::mutex> lock(mutex_);
    lastError_ = message;
  }
  target_.log(severity, message);
}

std::string ForwardingLogger::takeLastError() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string message = std::move(lastError_);
  lastError_.clear();
  return message;
}

ILayer* NetworkDefinition::Impl::withParams(
    ILayer* layer, LayerParams params,
    std::function<ILayer*(const std::vector<ITensor*>&, const LayerParams&)> recreateLayer) {
  if (!layer) return nullptr;
  LayerRecord& rec = layers.back();
  rec.params = std::move(params);
  rec.recreate = std::move(recreateLayer);
  return layer;
}

namespace {

const char* paramsKind(const LayerParams& params) {
  static const char* const kNames[] = {"no parameters",    "ConvolutionParams",  "PoolingParams",
                                       "ActivationParams", "SoftMaxParams",      "ShuffleParams",
                                       "ResizeParams",     "ConcatenationParams"};
  static_assert(std::size(kNames) == std::variant_size_v<LayerParams>);
  return kNames[params.index()];
}

// Removes the given nodes from the graph and renumbers the node indices the layers hold.
void removeNodes(NetworkDefinition::Impl& impl, std::vector<int> doomed, LayerRecord& extra) {
  std::sort(doomed.begin(), doomed.end());
  auto renumber = [&](int index) {
    return index -
           static_cast<int>(std::lower_bound(doomed.begin(), doomed.end(), index) - doomed.begin());
  };
  auto fix = [&](LayerRecord& rec) {
    for (int& n : rec.nodes) n = renumber(n);
    for (auto& slots : rec.inputSlots)
      for (auto& slot : slots) slot.first = renumber(slot.first);
  };
  for (auto it = doomed.rbegin(); it != doomed.rend(); ++it)
    impl.graph.nodes.erase(impl.graph.nodes.begin() + *it);
  for (LayerRecord& rec : impl.layers) fix(rec);
  fix(extra);
}

// The node of `nodes` that produces `valueId`, and the output slot.
std::pair<ir::Node*, size_t> producerOf(ir::Graph& graph, const std::vector<int>& nodes,
                                        int valueId) {
  for (int n : nodes) {
    ir::Node& node = graph.nodes[static_cast<size_t>(n)];
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (node.outputs[k] == valueId) return {&node, k};
  }
  return {nullptr, 0};
}

}  // namespace

int NetworkDefinition::Impl::layerIndex(const ILayer& handle) const {
  const auto* own = dynamic_cast<const NetworkLayer*>(&handle);
  return own && &own->network() == &network ? own->index() : -1;
}

LayerParams getLayerParams(const NetworkDefinition& network, const ILayer& layer) {
  const int index = network.impl().layerIndex(layer);
  if (index < 0) return {};
  return network.impl().layers.at(static_cast<size_t>(index)).params;
}

Status setLayerParams(NetworkDefinition& network, ILayer& layer, const LayerParams& params) {
  NetworkDefinition::Impl& impl = network.impl();
  const int index = impl.layerIndex(layer);
  if (index < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "layer '" + layer.getName() + "' is not a layer of this network");
  const LayerRecord& old = impl.layers.at(static_cast<size_t>(index));
  const std::string label = old.type + " layer '" + old.name + "'";
  if (!old.recreate)
    return Status(ErrorCode::kInvalidArgument, label + " has no parameters to change");
  if (params.index() != old.params.index()) {
    return Status(ErrorCode::kInvalidArgument,
                  label + " takes " + paramsKind(old.params) + ", not " + paramsKind(params));
  }
  std::vector<ITensor*> inputs;
  for (int id : old.inputs) inputs.push_back(impl.tensor(id));
  const auto recreate = old.recreate;  // adding a layer moves the records
  (void)impl.forwarder.takeLastError();
  if (!recreate(inputs, params)) {
    return Status(ErrorCode::kInvalidArgument,
                  label + ": the new parameters are refused: " + impl.forwarder.takeLastError());
  }
  return guardStatus(&impl.logger, [&] {
    LayerRecord fresh = std::move(impl.layers.back());
    impl.layers.pop_back();
    if (impl.layerHandles.size() > impl.layers.size()) impl.layerHandles.resize(impl.layers.size());
    LayerRecord& rec = impl.layers.at(static_cast<size_t>(index));
    // The new nodes take over the old output tensors; the old nodes' outputs become the new ones'.
    for (size_t k = 0; k < rec.outputs.size() && k < fresh.outputs.size(); ++k) {
      auto [newNode, newSlot] = producerOf(impl.graph, fresh.nodes, fresh.outputs[k]);
      auto [oldNode, oldSlot] = producerOf(impl.graph, rec.nodes, rec.outputs[k]);
      if (!newNode || !oldNode)
        throw Error(ErrorCode::kInvalidArgument, label + ": an output is not computed by a node");
      std::swap(newNode->outputs[newSlot], oldNode->outputs[oldSlot]);
    }
    removeNodes(impl, rec.nodes, fresh);
    rec.type = fresh.type;
    rec.nodes = std::move(fresh.nodes);
    rec.inputs = std::move(fresh.inputs);
    rec.inputSlots = std::move(fresh.inputSlots);
    rec.params = std::move(fresh.params);
    layer.setName(rec.name);  // names the new nodes after the layer
    impl.refreshShapes();
  });
}

}  // namespace kiln
