// What a NetworkDefinition holds: an ir::Graph (nodes with ONNX semantics) and the layers that
// group its nodes, with stable handles for tensors and layers.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
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
  std::vector<DataType> outputTypes;  // kUndefined: as computed
};

struct NetworkDefinition::Impl {
  explicit Impl(NetworkDefinition& owner, ILogger& log) : network(owner), logger(log) {}

  NetworkDefinition& network;
  ILogger& logger;
  ir::Graph graph;
  std::vector<LayerRecord> layers;
  std::map<int, std::unique_ptr<ITensor>> tensorHandles;  // by value id
  std::vector<std::unique_ptr<ILayer>> layerHandles;
  std::string source = "network definition";

  ITensor* tensor(int valueId);
  ILayer* layer(int index);
  /// "base", or "base_1", "base_2" ... if taken.
  std::string uniqueName(const std::string& base) const;
  /// Re-runs shape inference over the whole network (throws kiln::Error naming the node at fault).
  void refreshShapes();
  /// Replaces the network's content by an imported graph: one layer per node.
  void adoptGraph(ir::Graph graph, std::string sourceName);
  bool empty() const { return graph.values.empty() && graph.nodes.empty(); }
};

}  // namespace kiln
