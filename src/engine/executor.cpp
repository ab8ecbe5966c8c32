#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "kiln/error.h"
#include "plugin/plugin_node.h"

namespace kiln {

namespace {

void collectUnsupported(const ir::Graph& graph, const std::string& scope, std::vector<std::string>& problems) {
  for (const ir::Node& node : graph.nodes) {
    std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    if (!ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType + " at opset " +
                         std::to_string(node.opset) + " is not supported");
      if (std::string missing = plugin::describeMissingPlugin(node); !missing.empty()) problems.back() += "; " + missing;
    } else if (!cpu::KernelRegistry::global().find(node.domain, node.opType)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType + " has no CPU kernel");
    }
    for (const auto& [name, attr] : node.attrs) {  // control-flow bodies
      std::string inner = scope + node.label() + " attribute '" + name + "' > ";
      if (const auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr)) collectUnsupported(**g, inner, problems);
      if (const auto* gs = std::get_if<std::vector<std::shared_ptr<ir::Graph>>>(&attr))
        for (const auto& g : *gs) collectUnsupported(*g, inner, problems);
    }
  }
}

}  // namespace

std::vector<std::string> findUnsupportedNodes(const ir::Graph& graph) {
  std::vector<std::string> problems;
  collectUnsupported(graph, "", problems);
  return problems;
}

namespace {

[[noreturn]] void throwUnsupported(const std::vector<std::string>& problems) {
  std::string message = std::to_string(problems.size()) + " unsupported node" + (problems.size() > 1 ? "s" : "") + ": ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  throw Error(ErrorCode::kUnsupportedNode, message);
}

// "1x64x56x56 64x64x3x3 -": the shapes of a node's inputs, "-" for an omitted one.
std::string describeInputShapes(const std::vector<const Tensor*>& inputs) {
  std::string text;
  for (const Tensor* t : inputs) {
    if (!text.empty()) text += ' ';
    text += !t ? "-" : t->isSequence() ? "sequence" : shapeToString(t->shape());
  }
  return text;
}

}  // namespace

std::vector<Tensor> runNode(const ir::Node& node, const ir::OpSchema& schema, const cpu::KernelFn& kernel,
                            const std::vector<const Tensor*>& inputs, const std::vector<cpu::OutputStorage>* planned) {
  std::vector<ir::TypeInfo> inputTypes(inputs.size());
  std::vector<const ir::TypeInfo*> typePtrs(inputs.size(), nullptr);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k]) continue;
    const Tensor& t = *inputs[k];
    inputTypes[k] = t.isNone()       ? ir::TypeInfo{t.dtype(), std::nullopt, t.isNoneOfSequence(), true}
                    : t.isSequence() ? ir::TypeInfo{t.dtype(), std::nullopt, true}
                                     : ir::TypeInfo{t.dtype(), ir::symShapeOf(t.shape())};
    typePtrs[k] = &inputTypes[k];
  }
  std::vector<ir::TypeInfo> outTypes(node.outputs.size());
  ir::InferContext inferCtx(node, typePtrs, inputs, outTypes);
  schema.infer(inferCtx);

  std::vector<Tensor> outs(node.outputs.size());
  cpu::KernelContext ctx(node, inputs, outs, outTypes, planned);
  kernel(ctx);
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k] != ir::kNoValue && !outs[k].defined()) {
      ir::failNode(node, "kernel did not produce output " + std::to_string(k) + " (internal error)",
                   ErrorCode::kRuntimeError);
    }
  }
  return outs;
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph) : Executor(std::move(graph), nullptr) {}

Executor::Executor(std::shared_ptr<ir::Graph> graph, FreeCopiedWeights) : Executor(graph, graph.get()) {}

Executor::Executor(std::shared_ptr<const ir::Graph> graph, ir::Graph* freeCopiedWeightsIn) : graph_(std::move(graph)) {
  auto problems = findUnsupportedNodes(*graph_);
  if (!problems.empty()) throwUnsupported(problems);

  isNodeOutput_.assign(graph_->values.size(), false);
  for (const ir::Node& node : graph_->nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) isNodeOutput_[static_cast<size_t>(id)] = true;

  std::vector<int> lastUse(graph_->values.size(), -1);
  std::vector<int> readersLeft(graph_->values.size(), 0);  // node inputs not yet given a kernel
  for (size_t i = 0; i < graph_->nodes.size(); ++i) {
    for (int id : graph_->nodes[i].inputs) {
      if (id == ir::kNoValue) continue;
      lastUse[id] = static_cast<int>(i);
      ++readersLeft[id];
    }
  }
  for (int id : graph_->outputs) lastUse[id] = static_cast<int>(graph_->nodes.size());
  // Per value id: read as it is at run time (a graph output, or a reader without its own copy).
  std::vector<bool> valuesNeeded(graph_->values.size(), false);
  for (int id : graph_->outputs) valuesNeeded[static_cast<size_t>(id)] = true;

  for (size_t i = 0; i < graph_->nodes.size(); ++i) {
    const ir::Node& node = graph_->nodes[i];
    cpu::KernelCreateInfo info{node, {}, {}, {}};
    for (int id : node.inputs) {
      const ir::Value* v = id == ir::kNoValue ? nullptr : &graph_->value(id);
      info.inputTypes.push_back(v ? &v->type : nullptr);
      info.constants.push_back(v && v->constant && !graph_->isGraphInput(id) ? &*v->constant : nullptr);
    }
    Step step{&node, ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset),
              (*cpu::KernelRegistry::global().find(node.domain, node.opType))(info), {}};
    for (int id : node.inputs) {
      if (id != ir::kNoValue && lastUse[id] == static_cast<int>(i) && !graph_->value(id).constant &&
          std::find(step.release.begin(), step.release.end(), id) == step.release.end()) {
        step.release.push_back(id);
      }
    }
    for (int id : node.outputs)  // outputs nobody reads
      if (id != ir::kNoValue && lastUse[id] == -1) step.release.push_back(id);
    steps_.push_back(std::move(step));

    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int id = node.inputs[k];
      if (id == ir::kNoValue) continue;
      if (!info.constants[k] || k >= info.ownCopies.size() || !info.ownCopies[k]) valuesNeeded[id] = true;
      if (--readersLeft[id] > 0 || valuesNeeded[id]) continue;
      ownCopied_.push_back(id);
      if (freeCopiedWeightsIn) {  // now, so that all originals and all copies never coexist
        Tensor& value = *freeCopiedWeightsIn->value(id).constant;
        value = Tensor::wrap(value.dtype(), value.shape(), nullptr, nullptr);
      }
    }
  }
}

std::vector<cpu::OutputStorage> Executor::placeValues(const std::vector<std::pair<int, Tensor>>& inputs,
                                                      ExecutorMemory& memory,
                                                      const std::vector<OutputBuffer>& outputBuffers) const {
  const ir::Graph& g = *graph_;
  std::vector<std::pair<int, Shape>> signature;
  signature.reserve(inputs.size());
  for (const auto& [id, tensor] : inputs) signature.emplace_back(id, tensor.shape());
  if (!memory.planned_ || signature != memory.signature_) {
    memory.plan_ = MemoryPlan{};
    try {
      memory.plan_ = planMemoryForInputShapes(g, signature);
    } catch (const Error&) {
      // Shapes the graph rejects: run unplanned, so the failing node reports the problem itself.
    }
    memory.signature_ = std::move(signature);
    memory.planned_ = true;
    ++memory.planCount_;
    if (memory.capacity_ < memory.plan_.arenaBytes) {
      memory.arena_.reset();  // free the smaller arena first
      memory.capacity_ = 0;
      void* p = std::aligned_alloc(kArenaAlignment, memory.plan_.arenaBytes);
      if (!p) {
        throw Error(ErrorCode::kRuntimeError,
                    "out of memory allocating the " + std::to_string(memory.plan_.arenaBytes) + "-byte tensor arena");
      }
      memory.arena_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
      memory.capacity_ = memory.plan_.arenaBytes;
    }
  }
  const MemoryPlan& plan = memory.plan_;
  if (plan.offsets.empty()) return {};

  std::vector<cpu::OutputStorage> storage(g.values.size());
  for (size_t id = 0; id < g.values.size(); ++id) {
    if (plan.offsets[id] == MemoryPlan::kNotPlaced) continue;
    storage[id] = {memory.arena_.get() + plan.offsets[id], plan.bytes[id], memory.arena_};
  }
  // A graph output (or the tensor it is a view of) is computed in the caller's buffer when its
  // size is known now, it fits, and the buffer is not also an input being read.
  for (const OutputBuffer& buffer : outputBuffers) {
    const size_t root = static_cast<size_t>(plan.storageOf.at(static_cast<size_t>(buffer.valueId)));
    const uint64_t bytes = plan.bytes[root];
    if (!buffer.data || !isNodeOutput_[root] || g.values[root].constant || storage[root].data || bytes == 0 ||
        bytes != plan.bytes[static_cast<size_t>(buffer.valueId)] || (buffer.capacity && buffer.capacity < bytes)) {
      continue;
    }
    const auto* begin = static_cast<const uint8_t*>(buffer.data);
    bool overlapsInput = false;
    for (const auto& [id, tensor] : inputs) {
      const auto* in = static_cast<const uint8_t*>(tensor.raw());
      if (in && in < begin + bytes && begin < in + tensor.byteSize()) overlapsInput = true;
    }
    if (!overlapsInput) storage[root] = {buffer.data, bytes, nullptr};
  }
  return storage;
}

std::vector<Tensor> Executor::run(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory* memory,
                                  const std::vector<OutputBuffer>& outputBuffers, IProfiler* profiler) const {
  const ir::Graph& g = *graph_;
  std::vector<Tensor> slots(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant) slots[i] = *g.values[i].constant;
  for (const auto& [id, tensor] : inputs) slots[id] = tensor;

  std::vector<cpu::OutputStorage> storage;  // per value id; empty: every output on the heap
  if (memory) storage = placeValues(inputs, *memory, outputBuffers);
  const auto arenaBegin = storage.empty() ? 0 : reinterpret_cast<uintptr_t>(memory->arena_.get());
  const auto arenaEnd = arenaBegin ? arenaBegin + memory->capacity_ : 0;
  std::vector<cpu::OutputStorage> planned;  // the current node's outputs

  for (const Step& step : steps_) {
    const ir::Node& node = *step.node;
    std::vector<const Tensor*> in;
    for (int id : node.inputs) {
      if (id != ir::kNoValue && !slots[id].defined()) {
        ir::failNode(node, "input '" + g.value(id).name + "' has no value (internal error)", ErrorCode::kRuntimeError);
      }
      in.push_back(id == ir::kNoValue ? nullptr : &slots[id]);
    }
    if (!storage.empty()) {
      planned.assign(node.outputs.size(), {});
      for (size_t k = 0; k < node.outputs.size(); ++k)
        if (node.outputs[k] != ir::kNoValue) planned[k] = storage[static_cast<size_t>(node.outputs[k])];
    }
    const auto start = profiler ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    std::vector<Tensor> outs = runNode(node, *step.schema, step.kernel, in, storage.empty() ? nullptr : &planned);
    if (profiler) {
      const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
      const std::string op = node.domain.empty() ? node.opType : node.domain + "::" + node.opType;
      profiler->reportLayerTime({node.name, op, describeInputShapes(in), elapsed.count()});
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue) continue;
      const void* data = outs[k].raw();
      const auto address = reinterpret_cast<uintptr_t>(data);
      if (arenaBegin && address >= arenaBegin && address < arenaEnd) {
        // In the arena, a tensor may only live in its own slot (or its source's, for a view):
        // any other slot is reused by the plan once its lifetime ends.
        const auto root = static_cast<size_t>(memory->plan_.storageOf[static_cast<size_t>(id)]);
        if (data != storage[root].data) outs[k] = outs[k].clone();
      }
      slots[id] = std::move(outs[k]);
    }
    for (int id : step.release) slots[id] = Tensor();
  }
  std::vector<Tensor> results;
  for (int id : g.outputs) results.push_back(slots[id]);
  return results;
}

}  // namespace kiln
