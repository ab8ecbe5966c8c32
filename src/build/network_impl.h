// What a NetworkDefinition holds: an ir::Graph (nodes with ONNX semantics) and the layers that
// group its nodes, with stable handles for tensors and layers.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kiln/layer_params.h"
#include "kiln/network.h"

namespace kiln {

/// ONNX opset of the nodes that the network API creates.
constexpr int64_t kNetworkOpset = 17;

struct LayerRecord {
  std::string name;
  std::string type;
  std::vector<int> nodes;   // indices into graph.nodes (nodes are only ever appended)
  std::vector<int> inputs;  // value ids of the layer's inputs
  std::vector<std::vector<std::pair<int, int>>> inputSlots;  // per input: (node index, input slot)
  std::vector<int> outputs;  // value ids
  DataType precision = DataType::kFloat32;
  bool precisionSet = false;  // setPrecision was called (a constraint, kFloat32 included)
  std::vector<DataType> outputTypes;  // kUndefined: as computed
  LayerParams params;  // std::monostate: none to change
  /// Adds the layer anew from its inputs and new params (setLayerParams); empty without params.
  std::function<ILayer*(const std::vector<ITensor*>& inputs, const LayerParams& params)> recreate;
};

/// Passes messages on to the application's logger and keeps the last error (setLayerParams
/// reports why a re-created layer was refused).
class ForwardingLogger : public ILogger {
 public:
  explicit ForwardingLogger(ILogger& target) : target_(target) {}
  void log(Severity severity, const std::string& message) noexcept override;
  std::string takeLastError();

 private:
  ILogger& target_;
  std::mutex mutex_;
  std::string lastError_;
};

struct NetworkDefinition::Impl {
  explicit Impl(NetworkDefinition& owner, ILogger& log) : network(owner), forwarder(log), logger(forwarder) {}

  NetworkDefinition& network;
  ForwardingLogger forwarder;
  ILogger& logger;  // the forwarder
  ir::Graph graph;
  std::vector<LayerRecord> layers;
  std::map<int, std::unique_ptr<ITensor>> tensorHandles;  // by value id
  std::vector<std::unique_ptr<ILayer>> layerHandles;
  std::string source = "network definition";

  ITensor* tensor(int valueId);
  ILayer* layer(int index);
  /// The index of a layer handle of this network; -1 if it is not one.
  int layerIndex(const ILayer& handle) const;
  /// "base", or "base_1", "base_2" ... if taken.
  std::string uniqueName(const std::string& base) const;
  /// Re-runs shape inference over the whole network (throws kiln::Error naming the node at fault).
  void refreshShapes();
  /// Replaces the network's content by an imported graph: one layer per node.
  void adoptGraph(ir::Graph graph, std::string sourceName);
  /// Sets the params (and how to re-create with others) of the layer just added, if it was.
  ILayer* withParams(ILayer* layer, LayerParams params,
                     std::function<ILayer*(const std::vector<ITensor*>&, const LayerParams&)> recreate);
  bool empty() const { return graph.values.empty() && graph.nodes.empty(); }
};

}  // namespace kiln
