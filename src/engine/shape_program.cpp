#include "engine/shape_program.h"

#include <algorithm>

#include "engine/executor.h"
#include "engine/subgraph.h"

namespace kiln {

namespace {

// Shape and Size read only their input's shape, never its values.
bool readsOnlyShape(const ir::Node& node) {
  return (node.domain.empty() || node.domain == "ai.onnx") &&
         (node.opType == "Shape" || node.opType == "Size") && node.inputs.size() == 1 &&
         node.inputs[0] != ir::kNoValue;
}

bool isKnownConstant(const ir::Graph& graph, int id) {
  return graph.value(id).constant.has_value() && !graph.isGraphInput(id);
}

// A value with a static shape of more elements than a shape program computes.
bool isLarge(const ir::TypeInfo& type) {
  if (!type.shape) return false;
  const auto shape = ir::concreteShape(*type.shape);
  if (!shape) return false;
  // Multiplied here rather than by shapeNumel, which throws where a declared shape overflows int64:
  // such a value is large, and is refused by name when a tensor of it is made.
  int64_t n = 1;
  for (int64_t d : *shape) {
    if (d == 0) return false;
    if (d > ShapeProgram::kMaxShapeValueElements / n) return true;
    n *= d;
  }
  return n > ShapeProgram::kMaxShapeValueElements;
}

// A node whose outputs are known once the input shapes are: a deterministic op with a kernel and
// no body, that reads only shapes or values known before it runs (`known`, per value id), and
// whose outputs are plain tensors that are not statically large.
bool isStep(const ir::Graph& graph, const ir::Node& node, const std::vector<bool>& known) {
  const ir::OpSchema* schema =
      ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  if (!schema || !schema->deterministic || node.plugin ||
      !cpu::KernelRegistry::global().find(node.domain, node.opType)) {
    return false;
  }
  for (const auto& [name, attr] : node.attrs) {
    if (std::holds_alternative<std::shared_ptr<ir::Graph>>(attr) ||
        std::holds_alternative<std::vector<std::shared_ptr<ir::Graph>>>(attr)) {
      return false;
    }
  }
  for (int id : node.outputs) {
    if (id == ir::kNoValue) continue;
    const ir::TypeInfo& t = graph.value(id).type;
    if (t.isSequence || t.isOptional || isLarge(t)) return false;
  }
  if (readsOnlyShape(node)) return true;
  return std::all_of(node.inputs.begin(), node.inputs.end(),
                     [&](int id) { return id == ir::kNoValue || known[static_cast<size_t>(id)]; });
}

// A weight whose values the executor freed (its readers keep their own copies): only its shape is
// left.
bool hasNoData(const Tensor& t) { return !t.raw() && t.byteSize() > 0; }

}  // namespace

ShapeProgram::ShapeProgram(const ir::Graph& graph) : graph_(graph) {
  std::vector<bool> known(graph.values.size(), false);
  for (size_t id = 0; id < graph.values.size(); ++id)
    known[id] = isKnownConstant(graph, static_cast<int>(id));
  stepOf_.assign(graph.nodes.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = graph.nodes[i];
    if (!isStep(graph, node, known)) continue;
    cpu::KernelCreateInfo info{node, {}, {}, {}, &executorSubgraphRunners()};
    for (int id : node.inputs) {
      info.inputTypes.push_back(id == ir::kNoValue ? nullptr : &graph.value(id).type);
      info.constants.push_back(
          id != ir::kNoValue && isKnownConstant(graph, id) ? &*graph.value(id).constant : nullptr);
    }
    const ir::OpSchema* schema =
        ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    stepOf_[i] = static_cast<int>(steps_.size());
    steps_.push_back(
        {i, schema, (*cpu::KernelRegistry::global().find(node.domain, node.opType))(info)});
    for (int id : node.outputs)
      if (id != ir::kNoValue) known[static_cast<size_t>(id)] = true;
  }
}

std::vector<size_t> ShapeProgram::stepNodes() const {
  std::vector<size_t> nodes;
  for (const Step& s : steps_) nodes.push_back(s.node);
  return nodes;
}

void ShapeProgram::evaluate(const Step& step, Resolution& r,
                            std::vector<const Tensor*>& known) const {
  const ir::Node& node = graph_.nodes[step.node];
  for (int id : node.outputs)
    if (id != ir::kNoValue && isLarge(r.types[static_cast<size_t>(id)])) return;
  std::vector<Tensor> shapeOnly;  // Shape / Size: a tensor of the inferred shape, with no data
  std::vector<const Tensor*> inputs;
  if (readsOnlyShape(node)) {
    const ir::TypeInfo& t = r.types[static_cast<size_t>(node.inputs[0])];
    const auto shape = t.shape && !t.isSequence ? ir::concreteShape(*t.shape) : std::nullopt;
    if (!shape || t.dtype == DataType::kUndefined) return;  // not known until run time
    shapeOnly.push_back(Tensor::wrap(t.dtype, *shape, nullptr, nullptr));
    inputs.push_back(&shapeOnly[0]);
  } else {
    for (int id : node.inputs) {
      const Tensor* value = id == ir::kNoValue ? nullptr : known[static_cast<size_t>(id)];
      if (id != ir::kNoValue && (!value || hasNoData(*value)))
        return;  // an earlier step did not run
      inputs.push_back(value);
    }
  }
  std::vector<Tensor> outs = runNode(node, *step.schema, step.kernel, inputs);
  if (std::any_of(outs.begin(), outs.end(),
                  [](const Tensor& t) { return t.isSequence() || t.isNone(); }))
    return;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const int id = node.outputs[k];
    if (id == ir::kNoValue) continue;
    const auto i = static_cast<size_t>(id);
    r.types[i] = ir::TypeInfo{outs[k].dtype(), ir::symShapeOf(outs[k].shape())};
    r.values[i] = std::move(outs[k]);
    known[i] = &r.values[i];
  }
}

ShapeProgram::Resolution ShapeProgram::resolve(
    const std::vector<std::pair<int, Shape>>& inputShapes) const {
  const ir::Graph& g = graph_;
  const size_t n = g.values.size();
  Resolution r;
  r.types.reserve(n);
  for (const ir::Value& v : g.values) r.types.push_back(v.type);
  for (const auto& [id, shape] : inputShapes) {
    ir::TypeInfo& t = r.types[static_cast<size_t>(id)];
    if (!t.isSequence) t.shape = ir::symShapeOf(shape);  // sequences have no shape
  }
  // Forget the types recorded at build time (symbolic dims): infer them all from these shapes.
  for (const ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) r.types[static_cast<size_t>(id)] = ir::TypeInfo{};
  r.values.resize(n);
  std::vector<const Tensor*> known(n,
                                   nullptr);  // per value id: its value when known before the run
  for (size_t id = 0; id < n; ++id)
    if (isKnownConstant(g, static_cast<int>(id))) known[id] = &*g.values[id].constant;

  std::vector<const ir::TypeInfo*> inputTypes;
  std::vector<const Tensor*> inputValues;
  std::vector<ir::TypeInfo*> outputTypes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    const ir::OpSchema* schema =
        ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    if (!schema) continue;  // reported by the unsupported-op check
    inputTypes.clear();
    inputValues.clear();
    outputTypes.clear();
    for (int id : node.inputs) {
      inputTypes.push_back(id == ir::kNoValue ? nullptr : &r.types[static_cast<size_t>(id)]);
      inputValues.push_back(id == ir::kNoValue ? nullptr : known[static_cast<size_t>(id)]);
    }
    for (int id : node.outputs)
      outputTypes.push_back(id == ir::kNoValue ? nullptr : &r.types[static_cast<size_t>(id)]);
    ir::inferNodeTypes(g, node, *schema, inputTypes, inputValues, outputTypes);
    if (stepOf_[i] >= 0) evaluate(steps_[static_cast<size_t>(stepOf_[i])], r, known);
  }
  return r;
}

}  // namespace kiln
