// Adds one layer (its constants, nodes and outputs) to a network, all or nothing: if shape
// inference rejects the new nodes, everything added is taken back and the logger says why.
#pragma once
#include <string>
#include <vector>

#include "build/network_impl.h"

namespace kiln {

class LayerTransaction {
 public:
  LayerTransaction(NetworkDefinition::Impl& net, const std::string& type);
  ~LayerTransaction();  // rolls back unless committed

  const std::string& name() const { return record_.name; }
  /// Registers a tensor as an input of the layer; returns its value id.
  int input(const ITensor& tensor);
  /// Adds a constant value named "<layer>_<suffix>".
  int constant(const std::string& suffix, Tensor value);
  /// Adds a node; returns the value ids of its outputs ("<layer>_output" for the layer's result,
  /// "<layer>_<op>" for intermediate nodes).
  std::vector<int> node(const std::string& opType, std::vector<int> inputs,
                        ir::AttributeMap attrs = {}, int numOutputs = 1);
  /// Runs shape inference and keeps the layer; nullptr (and an error logged) if it is invalid.
  ILayer* commit(std::vector<int> outputs);
  /// Fails the layer with a message naming it.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  NetworkDefinition::Impl& net_;
  LayerRecord record_;
  size_t valueMark_;
  size_t nodeMark_;
  bool committed_ = false;
};

/// Copies Weights into a tensor of the given shape; throws if the count or type is wrong.
Tensor tensorFromWeights(const Weights& weights, const Shape& shape, const std::string& what);

}  // namespace kiln
