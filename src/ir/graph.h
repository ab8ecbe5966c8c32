// kiln's network IR: values (named tensors with dtype and symbolic shape) and nodes in topological
// order.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/internal_api.h"
#include "ir/attribute.h"
#include "ir/sym_shape.h"
#include "kiln/tensor.h"

namespace kiln {
class IPlugin;
}

namespace kiln::ir {

struct TypeInfo {
  DataType dtype = DataType::kUndefined;  // a sequence's element type
  std::optional<SymShape> shape;          // nullopt: rank unknown (always for sequences)
  bool isSequence = false;                // an ONNX sequence of tensors rather than a tensor
  /// An ONNX optional of the tensor or sequence described above. Its value at run time is that
  /// tensor or sequence when present, else Tensor::none (see Tensor::none).
  bool isOptional = false;
  /// A map's key type (int64 or string; dtype is then its value type), or that of the maps of a
  /// sequence of maps (ZipMap's output); kUndefined for tensors and sequences of tensors.
  DataType mapKeyType = DataType::kUndefined;
};

struct Value {
  std::string name;
  TypeInfo type;
  std::optional<Tensor> constant;  // initializer or folded constant
  int producer = -1;               // node index, -1 for graph inputs and constants
};

constexpr int kNoValue = -1;  // an omitted optional input ("")

struct KILN_INTERNAL_API Node {
  std::string name;
  std::string opType;
  std::string domain;        // "" for the default ai.onnx domain
  int64_t opset = 0;         // the model's opset for this node's domain
  std::vector<int> inputs;   // value ids, kNoValue for omitted optional inputs
  std::vector<int> outputs;  // value ids, kNoValue for omitted optional outputs
  AttributeMap attrs;
  /// Inputs past this index are implicit: outer-scope values its subgraphs read (-1: all explicit).
  int explicitInputs = -1;
  /// Plugin nodes (include/kiln/plugin.h): the plugin made from the node's fields at import, or
  /// from its bytes in a plan; its op type is the plugin's name and its domain the namespace.
  std::shared_ptr<const IPlugin> plugin;

  std::string label() const;  // "node 'conv1' (Conv)"
  size_t numExplicitInputs() const {
    return explicitInputs < 0 ? inputs.size() : static_cast<size_t>(explicitInputs);
  }
};

/// Counts the copies of graphs made in this process (copy construction and assignment; moves do
/// not count), so that tests can check that the runtime copies no graph once an engine is built.
struct KILN_INTERNAL_API GraphCopyCounter {
  GraphCopyCounter() = default;
  GraphCopyCounter(const GraphCopyCounter&) { copies.fetch_add(1, std::memory_order_relaxed); }
  GraphCopyCounter(GraphCopyCounter&&) noexcept = default;
  GraphCopyCounter& operator=(const GraphCopyCounter&) {
    copies.fetch_add(1, std::memory_order_relaxed);
    return *this;
  }
  GraphCopyCounter& operator=(GraphCopyCounter&&) noexcept = default;
  static inline std::atomic<uint64_t> copies{0};
};

struct KILN_INTERNAL_API Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;  // graph inputs without an initializer, or overridable initializers
  std::vector<int> outputs;
  /// A subgraph's values read from enclosing scopes, bound positionally to the owning node's
  /// implicit inputs; kNoValue where this subgraph does not read that input.
  std::vector<int> outerInputs;
  std::unordered_map<std::string, int> valueIds;
  GraphCopyCounter copyCounter;

  int findValue(const std::string& name) const;
  /// Adds a value (names must be unique) and returns its id.
  int addValue(const std::string& name, TypeInfo type = {});
  int valueId(const std::string& name);  // existing id or a new value
  const Value& value(int id) const { return values.at(static_cast<size_t>(id)); }
  Value& value(int id) { return values.at(static_cast<size_t>(id)); }
  bool isGraphInput(int id) const;
};

struct Model {
  Graph graph;
  int64_t irVersion = 0;
  std::string producerName;
  std::string producerVersion;
  std::string path;                       // file the model was read from
  std::map<std::string, int64_t> opsets;  // domain -> version
  std::map<std::string, std::string> metadata;
  std::map<std::string, int> opCounts;
  size_t initializerCount = 0;
  uint64_t initializerBytes = 0;  // node count by op type, as in the file (Constant included)
};

/// Reorders nodes topologically and sets producers; throws naming the nodes of a cycle.
KILN_INTERNAL_API void sortTopologically(Graph& graph);
/// Checks ids, single producers, and that every input has a producer; throws naming the problem.
KILN_INTERNAL_API void verifyGraph(const Graph& graph);
/// Human-readable listing: inputs, outputs and one line per node.
std::string printGraph(const Graph& graph);

}  // namespace kiln::ir
