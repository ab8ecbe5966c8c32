#include "ir/op_schema.h"

#include <algorithm>

#include "core/tensor_limits.h"
#include "ir/shape_inference_report.h"
#include "ir/type_constraints.h"

namespace kiln::ir {

InferContext::InferContext(const Node& node, std::vector<const TypeInfo*> inputTypes,
                           std::vector<const Tensor*> inputValues, std::vector<TypeInfo>& outputs)
    : node_(node),
      inputTypes_(std::move(inputTypes)),
      inputValues_(std::move(inputValues)),
      outputs_(outputs) {}

DataType InferContext::inputType(size_t i) const {
  requireInput(i);
  return inputTypes_[i]->dtype;
}

const SymShape* InferContext::inputShape(size_t i) const {
  requireInput(i);
  const auto& s = inputTypes_[i]->shape;
  return s ? &*s : nullptr;
}

std::optional<Shape> InferContext::inputConcreteShape(size_t i) const {
  const SymShape* s = inputShape(i);
  if (!s) return std::nullopt;
  return concreteShape(*s);
}

std::optional<std::vector<int64_t>> InferContext::inputInts(size_t i) const {
  const Tensor* t = inputValue(i);
  if (!t) return std::nullopt;
  return t->toInt64Vector();
}

void InferContext::setOutput(size_t i, DataType dtype, SymShape shape) {
  if (i >= outputs_.size()) return;  // optional output not requested
  if (shape.size() > kMaxTensorRank) {
    fail("output " + std::to_string(i) + " would have rank " + std::to_string(shape.size()) +
         ", more than kiln's " + std::to_string(kMaxTensorRank) + " dimensions");
  }
  outputs_[i] = TypeInfo{dtype, std::move(shape)};
}

SymShape InferContext::unknownDims(int64_t rank, size_t from) const {
  if (rank < 0 || static_cast<size_t>(rank) > kMaxTensorRank) {
    fail("input " + std::to_string(from) + " holds " + std::to_string(rank) +
         " values, the output's rank, which must be at most kiln's " +
         std::to_string(kMaxTensorRank));
  }
  return SymShape(static_cast<size_t>(rank), Dim::unknown());
}

void InferContext::setOutputType(size_t i, DataType dtype) {
  if (i >= outputs_.size()) return;
  outputs_[i] = TypeInfo{dtype, std::nullopt};
}

bool InferContext::inputIsSequence(size_t i) const {
  requireInput(i);
  return inputTypes_[i]->isSequence;
}

void InferContext::setSequenceOutput(size_t i, DataType elementType) {
  if (i >= outputs_.size()) return;
  outputs_[i] = TypeInfo{elementType, std::nullopt, true};
}

bool InferContext::inputIsOptional(size_t i) const {
  requireInput(i);
  return inputTypes_[i]->isOptional;
}

const TypeInfo& InferContext::inputTypeInfo(size_t i) const {
  requireInput(i);
  return *inputTypes_[i];
}

void InferContext::setOutputTypeInfo(size_t i, TypeInfo type) {
  if (i >= outputs_.size()) return;
  if (type.isSequence) type.shape = std::nullopt;  // the items' shapes are not tracked
  outputs_[i] = std::move(type);
}

void InferContext::fail(const std::string& message, ErrorCode code) const {
  failNode(node_, message, code);
}

void InferContext::requireInput(size_t i) const {
  if (!hasInput(i)) fail("input " + std::to_string(i) + " is required");
}

OpSchemaRegistry& OpSchemaRegistry::global() {
  static OpSchemaRegistry registry;
  return registry;
}

void OpSchemaRegistry::add(OpSchema schema) { schemas_.push_back(std::move(schema)); }

const OpSchema* OpSchemaRegistry::find(const std::string& domain, const std::string& opType,
                                       int64_t opset) const {
  if (const OpSchema* s = findRegistered(domain, opType, opset)) return s;
  return fallback_ ? fallback_(domain == "ai.onnx" ? std::string() : domain, opType) : nullptr;
}

const OpSchema* OpSchemaRegistry::findRegistered(const std::string& domain,
                                                 const std::string& opType, int64_t opset) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  for (const OpSchema& s : schemas_) {
    if (s.opType == opType && s.domain == d && opset >= s.minOpset && opset <= s.maxOpset)
      return &s;
  }
  return nullptr;
}

std::vector<const OpSchema*> OpSchemaRegistry::all() const {
  std::vector<const OpSchema*> v;
  for (const OpSchema& s : schemas_) v.push_back(&s);
  std::sort(v.begin(), v.end(), [](const OpSchema* a, const OpSchema* b) {
    return std::tie(a->domain, a->opType, a->minOpset) <
           std::tie(b->domain, b->opType, b->minOpset);
  });
  return v;
}

namespace {

// Keeps what the model declared where inference knows less (unknown rank or anonymous dims).
TypeInfo mergeTypes(const TypeInfo& declared, const TypeInfo& inferred) {
  TypeInfo t = inferred;
  if (t.dtype == DataType::kUndefined) t.dtype = declared.dtype;
  // A value the model declares a sequence or an optional stays one where inference (an op that
  // passes its input through) only knew a tensor.
  t.isSequence = t.isSequence || declared.isSequence;
  t.isOptional = t.isOptional || declared.isOptional;
  if (t.mapKeyType == DataType::kUndefined) t.mapKeyType = declared.mapKeyType;
  if (t.isSequence) {
    t.shape = std::nullopt;  // the items' shapes are not tracked
    return t;
  }
  if (!t.shape) return TypeInfo{t.dtype, declared.shape, false, t.isOptional};
  if (declared.shape && declared.shape->size() == t.shape->size()) {
    for (size_t i = 0; i < t.shape->size(); ++i) {
      Dim& d = (*t.shape)[i];
      if (!d.isKnown() && d.symbol.empty()) d = (*declared.shape)[i];
    }
  }
  return t;
}

}  // namespace

void inferNodeTypes(const Graph& graph, const Node& node, const OpSchema& schema,
                    std::vector<const TypeInfo*> inputTypes, std::vector<const Tensor*> inputValues,
                    const std::vector<TypeInfo*>& outputTypes) {
  std::vector<std::string> names;
  for (int id : node.inputs) names.push_back(id == kNoValue ? std::string() : graph.value(id).name);
  for (size_t i = 0; i < inputTypes.size(); ++i) {
    // Maps come only out of ZipMap, a model's last step; no kiln operator reads one.
    if (inputTypes[i] && inputTypes[i]->mapKeyType != DataType::kUndefined) {
      failNode(node,
               "input " + std::to_string(i) + " '" + names[i] +
                   "' is a map (ZipMap's output); kiln's operators do not read maps",
               ErrorCode::kUnsupportedNode);
    }
  }
  checkInputTypes(node, opTypesOf(schema), inputTypes, names);
  std::vector<TypeInfo> outputs(node.outputs.size());
  InferContext ctx(node, std::move(inputTypes), std::move(inputValues), outputs);
  schema.infer(ctx);
  for (size_t i = 0; i < node.outputs.size() && i < outputTypes.size(); ++i)
    if (outputTypes[i]) *outputTypes[i] = mergeTypes(*outputTypes[i], outputs[i]);
}

namespace {

// inferNodeTypes on the graph's own types and constants.
void inferNodeInGraph(Graph& graph, const Node& node, const OpSchema& schema) {
  std::vector<const TypeInfo*> types;
  std::vector<const Tensor*> values;
  for (int id : node.inputs) {
    types.push_back(id == kNoValue ? nullptr : &graph.value(id).type);
    values.push_back(id == kNoValue || !graph.value(id).constant ? nullptr
                                                                 : &*graph.value(id).constant);
  }
  std::vector<TypeInfo*> outputs;
  for (int id : node.outputs) outputs.push_back(id == kNoValue ? nullptr : &graph.value(id).type);
  inferNodeTypes(graph, node, schema, std::move(types), std::move(values), outputs);
}

}  // namespace

void inferShapes(Graph& graph) {
  for (Node& node : graph.nodes) {
    const OpSchema* schema = OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    if (!schema) continue;  // reported by the unsupported-op check
    inferNodeInGraph(graph, node, *schema);
  }
}

std::vector<std::string> inferShapesCollectingErrors(Graph& graph) {
  std::vector<std::string> errors;
  std::vector<bool> unknown(graph.values.size(), false);  // outputs of nodes that were not inferred
  for (Node& node : graph.nodes) {
    const OpSchema* schema = OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    bool inferred = schema && std::none_of(node.inputs.begin(), node.inputs.end(),
                                           [&](int id) { return id != kNoValue && unknown[id]; });
    if (inferred) {
      try {
        inferNodeInGraph(graph, node, *schema);
      } catch (const Error& e) {
        errors.push_back(e.what());
        inferred = false;
      }
    }
    if (!inferred)
      for (int id : node.outputs)
        if (id != kNoValue) unknown[id] = true;
  }
  return errors;
}

}  // namespace kiln::ir
