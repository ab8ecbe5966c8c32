// Operator definitions: for each (domain, op type), the opsets it covers and its shape/type
// inference. The same inference runs at build time (symbolic shapes, constants known) and at run
// time (concrete shapes, every input value known), so an op's shape rules live in one place.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"
#include "ir/node_attrs.h"
#include "kiln/error.h"

namespace kiln::ir {

class KILN_INTERNAL_API InferContext {
 public:
  InferContext(const Node& node, std::vector<const TypeInfo*> inputTypes,
               std::vector<const Tensor*> inputValues, std::vector<TypeInfo>& outputs);

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset; }
  size_t numInputs() const { return inputTypes_.size(); }
  /// False for inputs past the end and for omitted optional inputs ("").
  bool hasInput(size_t i) const { return i < inputTypes_.size() && inputTypes_[i] != nullptr; }
  DataType inputType(size_t i) const;
  /// The input's symbolic shape, or nullptr if its rank is unknown.
  const SymShape* inputShape(size_t i) const;
  /// The input's shape if every dim is known.
  std::optional<Shape> inputConcreteShape(size_t i) const;
  /// The input's value when known (a constant at build time; every input at run time).
  const Tensor* inputValue(size_t i) const {
    return i < inputValues_.size() ? inputValues_[i] : nullptr;
  }
  /// The input's value as int64s when known (for shape-like inputs).
  std::optional<std::vector<int64_t>> inputInts(size_t i) const;

  size_t numOutputs() const { return outputs_.size(); }
  void setOutput(size_t i, DataType dtype, SymShape shape);
  void setOutput(size_t i, DataType dtype, const Shape& shape) {
    setOutput(i, dtype, symShapeOf(shape));
  }
  /// Output of known dtype whose rank is not known until run time.
  void setOutputType(size_t i, DataType dtype);
  /// A shape of `rank` unknown dims, the rank read from input `from`'s length; fails past
  /// kMaxTensorRank.
  SymShape unknownDims(int64_t rank, size_t from) const;
  /// Whether input i is a sequence value (sequence ops; see Tensor::sequence).
  bool inputIsSequence(size_t i) const;
  /// Output i is a sequence of tensors of `elementType`.
  void setSequenceOutput(size_t i, DataType elementType);
  /// Whether input i is an ONNX optional (present or none; see Tensor::none).
  bool inputIsOptional(size_t i) const;
  /// Input i's whole type (dtype, shape, sequence and optional flags).
  const TypeInfo& inputTypeInfo(size_t i) const;
  /// Sets output i's whole type (optionals, or types passed through from a subgraph).
  void setOutputTypeInfo(size_t i, TypeInfo type);

  [[noreturn]] void fail(const std::string& message,
                         ErrorCode code = ErrorCode::kInvalidModel) const;
  /// Fails unless the input exists and has one of the given types.
  void requireInput(size_t i) const;

 private:
  const Node& node_;
  std::vector<const TypeInfo*> inputTypes_;
  std::vector<const Tensor*> inputValues_;
  std::vector<TypeInfo>& outputs_;
};

using InferFn = std::function<void(InferContext&)>;

struct OpSchema {
  std::string domain;  // "" = ai.onnx
  std::string opType;
  int64_t minOpset = 1;     // first opset version kiln implements
  int64_t maxOpset = 1000;  // last opset where the op exists (removed ops end early)
  InferFn infer;
  bool deterministic = true;  // false for random ops: never constant-folded
};

class KILN_INTERNAL_API OpSchemaRegistry {
 public:
  static OpSchemaRegistry& global();
  void add(OpSchema schema);
  /// The schema for (domain, opType) whose range covers opset, or else the fallback's answer
  /// (plugins), or nullptr.
  const OpSchema* find(const std::string& domain, const std::string& opType, int64_t opset) const;
  /// Like find, without the fallback: the operators kiln implements itself.
  const OpSchema* findRegistered(const std::string& domain, const std::string& opType,
                                 int64_t opset) const;
  /// Asked by find for an op with no registered schema (src/plugin sets it at load time).
  using Fallback =
      std::function<const OpSchema*(const std::string& domain, const std::string& opType)>;
  void setFallback(Fallback fallback) { fallback_ = std::move(fallback); }
  /// Every registered schema, sorted by domain and op type.
  std::vector<const OpSchema*> all() const;

 private:
  std::vector<OpSchema> schemas_;
  Fallback fallback_;
};

struct OpSchemaRegistrar {
  explicit OpSchemaRegistrar(OpSchema schema) { OpSchemaRegistry::global().add(std::move(schema)); }
};

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
/// Registers an OpSchema at load time: KILN_REGISTER_OP_SCHEMA({"", "Relu", 6, 1000, inferUnary});
#define KILN_REGISTER_OP_SCHEMA(...)                              \
  static ::kiln::ir::OpSchemaRegistrar KILN_CONCAT(kilnOpSchema_, \
                                                   __COUNTER__)(::kiln::ir::OpSchema __VA_ARGS__)

/// Shape/type inference of one node of `graph`: checks the input types (nullptr: omitted) against
/// the schema, infers from them and the known input values (nullptr: unknown), and merges each
/// output's result into *outputTypes[k] (nullptr: omitted), keeping what it held where inference
/// knows less. inferShapes runs it on the graph's own types; the runtime's shape programs on a
/// table of types of its own, so that the graph is never copied.
void inferNodeTypes(const Graph& graph, const Node& node, const OpSchema& schema,
                    std::vector<const TypeInfo*> inputTypes, std::vector<const Tensor*> inputValues,
                    const std::vector<TypeInfo*>& outputTypes);

/// Runs shape/type inference over the whole graph in order (nodes must be sorted).
/// Declared output types are kept where inference knows less.
KILN_INTERNAL_API void inferShapes(Graph& graph);

}  // namespace kiln::ir
