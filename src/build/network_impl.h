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
  std::vector<int> outputs;                                  // value ids
  DataType precision = DataType::kFloat32;
  bool precisionSet = false;          // setPrecision was called (a constraint, kFloat32 included)
  std::vector<DataType> outputTypes;  // kUndefined: as computed
  LayerParams params;                 // std::monostate: none to change
  /// Adds the layer anew from its inputs and new params (setLayerParams); empty without params.
  std::function<ILayer*(const std::vector<ITensor*>& inputs, const LayerParams& params)> recreate;
};

/// The network's own ITensor: a value of its graph.
class NetworkTensor final : public ITensor {
 public:
  NetworkTensor(NetworkDefinition& network, int valueId) : network_(network), valueId_(valueId) {}
  const std::string& getName() const override;
  Status setName(const std::string& name) override;
  Shape getDimensions() const override;
  bool hasShape() const override;
  DataType getType() const override;
  bool isNetworkInput() const override;
  bool isNetworkOutput() const override;

  const NetworkDefinition& network() const { return network_; }
  int valueId() const { return valueId_; }

 private:
  NetworkDefinition& network_;
  int valueId_;
};

/// The network's own ILayer: a record of its layers.
class NetworkLayer final : public ILayer {
 public:
  NetworkLayer(NetworkDefinition& network, int index) : network_(network), index_(index) {}
  const std::string& getName() const override;
  void setName(const std::string& name) override;
  const std::string& getType() const override;
  int getNbInputs() const override;
  ITensor* getInput(int index) const override;
  Status setInput(int index, ITensor& tensor) override;
  int getNbOutputs() const override;
  ITensor* getOutput(int index) const override;
  void setPrecision(DataType type) override;
  DataType getPrecision() const override;
  bool precisionIsSet() const override;
  void resetPrecision() override;
  void setOutputType(int index, DataType type) override;
  DataType getOutputType(int index) const override;

  const NetworkDefinition& network() const { return network_; }
  int index() const { return index_; }

 private:
  LayerRecord& record() const;
  NetworkDefinition& network_;
  int index_;
};

/// The value id of `tensor` in `network`; -1 when it is not one of that network's tensors.
int valueIdIn(const NetworkDefinition& network, const ITensor& tensor);

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
  explicit Impl(NetworkDefinition& owner, ILogger& log)
      : network(owner), forwarder(log), logger(forwarder) {}

  NetworkDefinition& network;
  ForwardingLogger forwarder;
  ILogger& logger;  // the forwarder
  ir::Graph graph;
  std::vector<LayerRecord> layers;
  std::map<int, std::unique_ptr<NetworkTensor>> tensorHandles;  // by value id
  std::vector<std::unique_ptr<NetworkLayer>> layerHandles;
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
  ILayer* withParams(
      ILayer* layer, LayerParams params,
      std::function<ILayer*(const std::vector<ITensor*>&, const LayerParams&)> recreate);
  bool empty() const { return graph.values.empty() && graph.nodes.empty(); }
};

}  // namespace kiln
