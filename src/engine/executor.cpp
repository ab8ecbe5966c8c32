#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "backends/cpu/run_control.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "core/tensor_limits.h"
#include "engine/subgraph.h"
#include "ir/unsupported_ops.h"
#include "kiln/error.h"
#include "plugin/plugin_node.h"

namespace kiln {

namespace {

void collectUnsupported(const ir::Graph& graph, const std::string& scope,
                        std::vector<std::string>& problems) {
  for (const ir::Node& node : graph.nodes) {
    std::string domain = node.domain.empty() ? "ai.onnx" : node.domain;
    if (!ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType +
                         " at opset " + std::to_string(node.opset) + " is not supported");
      if (std::string why = ir::whyUnsupported(node.domain, node.opType); !why.empty())
        problems.back() += ": " + why;
      if (std::string missing = plugin::describeMissingPlugin(node); !missing.empty())
        problems.back() += "; " + missing;
    } else if (!cpu::KernelRegistry::global().find(node.domain, node.opType)) {
      problems.push_back(scope + node.label() + ": operator " + domain + "::" + node.opType +
                         " has no CPU kernel");
    }
    for (const auto& [name, attr] : node.attrs) {  // control-flow bodies
      std::string inner = scope + node.label() + " attribute '" + name + "' > ";
      if (const auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr))
        collectUnsupported(**g, inner, problems);
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
  std::string message = std::to_string(problems.size()) + " unsupported node" +
                        (problems.size() > 1 ? "s" : "") + ": ";
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

namespace {

// The node's output types inferred from its concrete inputs.
void inferOutputTypes(const ir::Node& node, const ir::OpSchema& schema,
                      const std::vector<const Tensor*>& inputs,
                      std::vector<ir::TypeInfo>& outTypes) {
  std::vector<ir::TypeInfo> inputTypes(inputs.size());
  std::vector<const ir::TypeInfo*> typePtrs(inputs.size(), nullptr);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k]) continue;
    const Tensor& t = *inputs[k];
    inputTypes[k] = t.isNone() ? ir::TypeInfo{t.dtype(), std::nullopt, t.isNoneOfSequence(), true}
                    : t.isSequence() ? ir::TypeInfo{t.dtype(), std::nullopt, true}
                                     : ir::TypeInfo{t.dtype(), ir::symShapeOf(t.shape())};
    typePtrs[k] = &inputTypes[k];
  }
  outTypes.assign(node.outputs.size(), ir::TypeInfo{});
  ir::InferContext inferCtx(node, typePtrs, inputs, outTypes);
  schema.infer(inferCtx);
}

void checkOutputsMade(const ir::Node& node, const std::vector<Tensor>& outs) {
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k] != ir::kNoValue && !outs[k].defined()) {
      ir::failNode(node, "kernel did not produce output " + std::to_string(k) + " (internal error)",
                   ErrorCode::kRuntimeError);
    }
  }
}

// Runs a node's kernel. An error from below the kernel (a tensor over the allocation limit, a
// shape past int64, an allocation the system refused) gets the node's name, as the kernel's own
// errors have; errors naming a node already, and a terminated run, pass as they are.
void callKernel(const ir::Node& node, const cpu::KernelFn& kernel, cpu::KernelContext& ctx) {
  try {
    kernel(ctx);
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (message.find("node '") != std::string_view::npos || message.rfind("run terminated", 0) == 0)
      throw;
    ir::failNode(node, e.what(), e.code());
  } catch (const std::bad_alloc&) {
    ir::failNode(node, "out of memory: an allocation of its kernel was refused",
                 ErrorCode::kOutOfMemory);
  }
}

}  // namespace

std::vector<Tensor> runNode(const ir::Node& node, const ir::OpSchema& schema,
                            const cpu::KernelFn& kernel, const std::vector<const Tensor*>& inputs,
                            const std::vector<cpu::OutputStorage>* planned,
                            const cpu::OutputStorage* workspace) {
  std::vector<ir::TypeInfo> outTypes;
  inferOutputTypes(node, schema, inputs, outTypes);
  std::vector<Tensor> outs(node.outputs.size());
  cpu::KernelContext ctx(node, inputs, outs, outTypes, planned);
  if (workspace) ctx.setWorkspace(workspace->data, workspace->bytes);
  callKernel(node, kernel, ctx);
  checkOutputsMade(node, outs);
  return outs;
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph, KernelPolicy policy)
    : Executor(std::move(graph), nullptr, {}, nullptr, policy) {}

Executor::Executor(std::shared_ptr<const ir::Graph> graph,
                   const std::vector<std::string>& kernelIds, KernelPolicy policy)
    : Executor(std::move(graph), nullptr, kernelIds, nullptr, policy) {}

Executor::Executor(std::shared_ptr<ir::Graph> graph, FreeCopiedWeights,
                   const std::vector<std::string>& kernelIds,
                   const std::vector<cpu::KernelState>* states, KernelPolicy policy)
    : Executor(graph, graph.get(), kernelIds, states, policy) {}

std::vector<cpu::KernelState> Executor::kernelStates() const {
  std::vector<cpu::KernelState> states;
  for (const Step& step : steps_) states.push_back(step.save ? step.save() : cpu::KernelState{});
  return states;
}

const cpu::KernelCandidate* Executor::chooseKernel(const cpu::KernelCreateInfo& info, size_t i,
                                                   const std::vector<std::string>& kernelIds) {
  const cpu::KernelRegistry& registry = cpu::KernelRegistry::global();
  KernelChoice& choice = choices_.emplace_back();
  if (kernelIds.empty() || kernelIds.at(i).empty()) {
    cpu::KernelSelection selection = policy_ == KernelPolicy::kMostGeneral
                                         ? registry.selectMostGeneral(info)
                                         : registry.select(info);
    choice.declined = std::move(selection.declined);
    if (!selection.chosen)
      cpu::KernelRegistry::create(info, {nullptr, choice.declined});  // throws with the reasons
    choice.id = selection.chosen->id;
    choice.isa = selection.chosen->isa;
    return selection.chosen;
  }
  const ir::Node& node = info.node;
  const std::string& id = kernelIds.at(i);
  const std::string layer = "layer '" + node.name + "' (" + node.opType + "): kernel " + id;
  const cpu::KernelCandidate* c = registry.findById(info, id);
  if (!c)
    throw Error(ErrorCode::kInvalidPlan,
                layer + " is not one this kiln has; rebuild the plan with `kiln build`");
  if (!cpu::cpuSupports(c->isa)) {
    throw Error(ErrorCode::kInvalidPlan,
                layer + " needs " + cpu::isaFeatureName(c->isa) +
                    ", which this CPU lacks; rebuild the plan on this machine");
  }
  if (c->supports) {
    if (std::string reason = c->supports(info); !reason.empty()) {
      throw Error(ErrorCode::kInvalidPlan, layer + " does not support the node: " + reason);
    }
  }
  choice.id = c->id;
  choice.isa = c->isa;
  return c;
}

KernelMemoryNeeds Executor::memoryNeeds(int threads) const {
  KernelMemoryNeeds needs;
  needs.threads = std::max(threads, 1);
  for (const Step& step : steps_) {
    needs.rules.push_back(step.rules);
    needs.workspaces.push_back(step.workspace);
  }
  return needs;
}

Executor::Executor(std::shared_ptr<const ir::Graph> graph, ir::Graph* freeCopiedWeightsIn,
                   const std::vector<std::string>& kernelIds,
                   const std::vector<cpu::KernelState>* states, KernelPolicy policy)
    : graph_(std::move(graph)), shapes_(*graph_), policy_(policy) {
  auto problems = findUnsupportedNodes(*graph_);
  if (!problems.empty()) throwUnsupported(problems);

  isNodeOutput_.assign(graph_->values.size(), false);
  producerOf_.assign(graph_->values.size(), {-1, -1});
  for (size_t i = 0; i < graph_->nodes.size(); ++i) {
    const ir::Node& node = graph_->nodes[i];
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue) continue;
      isNodeOutput_[static_cast<size_t>(id)] = true;
      producerOf_[static_cast<size_t>(id)] = {static_cast<int>(i), static_cast<int>(k)};
    }
  }
  for (int id : graph_->inputs)
    hasInputsWithDefaults_ = hasInputsWithDefaults_ || graph_->value(id).constant.has_value();
  if (!kernelIds.empty() && kernelIds.size() != graph_->nodes.size()) {
    throw Error(ErrorCode::kInvalidPlan, std::to_string(kernelIds.size()) + " kernel choices for " +
                                             std::to_string(graph_->nodes.size()) + " nodes");
  }

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
    cpu::KernelCreateInfo info{node, {}, {}, {}, &executorSubgraphRunners()};
    for (int id : node.inputs) {
      const ir::Value* v = id == ir::kNoValue ? nullptr : &graph_->value(id);
      info.inputTypes.push_back(v ? &v->type : nullptr);
      info.constants.push_back(v && v->constant && !graph_->isGraphInput(id) ? &*v->constant
                                                                             : nullptr);
    }
    const cpu::KernelCandidate* candidate = chooseKernel(info, i, kernelIds);
    const cpu::KernelState* saved = states && i < states->size() ? &(*states)[i] : nullptr;
    const bool restore = saved && (!saved->blobs.empty() || !saved->params.empty());
    if (restore && !candidate->restore) {
      throw Error(ErrorCode::kInvalidPlan, "layer '" + node.name + "': kernel " + candidate->id +
                                               " keeps no packed state, yet the plan holds one");
    }
    cpu::Kernel kernel = restore ? candidate->restore(info, *saved) : candidate->create(info);
    Step step{&node,
              ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset),
              std::move(kernel.run),
              std::move(kernel.workspace),
              &candidate->memory,
              {},
              std::move(kernel.save),
              static_cast<bool>(candidate->restore)};
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
      const bool ownCopy = info.constants[k] && k < info.ownCopies.size() && info.ownCopies[k];
      if (info.constants[k] && !info.constants[k]->raw() && info.constants[k]->byteSize() &&
          !ownCopy) {
        // A plan left the values out for kernels that keep them packed; this one reads them.
        throw Error(ErrorCode::kInvalidPlan,
                    "layer '" + node.name + "': kernel " + choices_.back().id + " reads input '" +
                        graph_->value(id).name + "', whose values the plan does not hold");
      }
      if (!ownCopy) valuesNeeded[id] = true;
      if (--readersLeft[id] > 0 || valuesNeeded[id]) continue;
      ownCopied_.push_back(id);
      if (freeCopiedWeightsIn) {  // now, so that all originals and all copies never coexist
        Tensor& value = *freeCopiedWeightsIn->value(id).constant;
        value = Tensor::wrap(value.dtype(), value.shape(), nullptr, nullptr);
      }
    }
  }
}

namespace {

bool sameShapes(const std::vector<std::pair<int, Shape>>& signature,
                const std::vector<std::pair<int, Tensor>>& inputs) {
  if (signature.size() != inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (signature[i].first != inputs[i].first || signature[i].second != inputs[i].second.shape())
      return false;
  return true;
}

bool isPlainTensor(const ir::TypeInfo& type) {
  return !type.isSequence && !type.isOptional && type.dtype != DataType::kUndefined &&
         type.dtype != DataType::kString && type.shape && ir::concreteShape(*type.shape);
}

// Whether output `view` (kept from the last run) is still a view of `source` with this shape.
bool isViewOf(const Tensor& view, const Tensor& source, DataType dtype, const Shape& shape) {
  return view.defined() && view.raw() && view.raw() == source.raw() && view.dtype() == dtype &&
         view.shape() == shape;
}

}  // namespace

// Refuses a plan that needs a buffer over the allocation limit (core/tensor_limits.h) before
// anything is allocated: the first tensor or workspace too large is named with its node, else the
// arena as a whole with the input shapes.
void Executor::checkPlanFitsTheLimit(const MemoryPlan& plan, const std::vector<ir::TypeInfo>& types,
                                     const std::vector<std::pair<int, Shape>>& signature) const {
  const uint64_t limit = allocationLimitBytes();
  if (plan.arenaBytes <= limit) return;
  const ir::Graph& g = *graph_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const ir::Node& node = *steps_[i].node;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue || plan.bytes[static_cast<size_t>(id)] <= limit) continue;
      const ir::TypeInfo& type = types[static_cast<size_t>(id)];
      const std::string shape = type.shape ? ir::symShapeToString(*type.shape) : "?";
      ir::failNode(node,
                   "output " + std::to_string(k) + " '" + g.value(id).name + "' " +
                       dataTypeName(type.dtype) + "[" + shape + "] needs " +
                       byteCountText(plan.bytes[static_cast<size_t>(id)]) + ", " +
                       allocationLimitText(),
                   ErrorCode::kInvalidArgument);
    }
    if (i < plan.workspaceBytes.size() && plan.workspaceBytes[i] > limit) {
      ir::failNode(node,
                   "its workspace needs " + byteCountText(plan.workspaceBytes[i]) + ", " +
                       allocationLimitText(),
                   ErrorCode::kInvalidArgument);
    }
  }
  std::string shapes;
  for (const auto& [id, shape] : signature)
    shapes += (shapes.empty() ? "" : ", ") + g.value(id).name + ":" + shapeToString(shape);
  refuseAllocation(plan.arenaBytes,
                   "the tensor arena (every intermediate of a run) for input shapes " + shapes);
}

void Executor::preparePlan(const std::vector<std::pair<int, Tensor>>& inputs,
                           ExecutorMemory& memory) const {
  if (memory.planned_ && memory.executor_ == this && sameShapes(memory.signature_, inputs)) return;
  const ir::Graph& g = *graph_;
  memory.nodes_.clear();  // drops the old arena's views before the arena is replaced
  memory.signature_.clear();
  for (const auto& [id, tensor] : inputs) memory.signature_.emplace_back(id, tensor.shape());
  memory.plan_ = MemoryPlan{};
  std::vector<ir::TypeInfo> types;
  const cpu::ThreadPool* pool = cpu::currentThreadPool();
  const KernelMemoryNeeds needs = memoryNeeds(pool ? pool->size() : 1);
  try {
    memory.plan_ = planMemoryForInputShapes(g, shapes_, memory.signature_, &types, &needs);
  } catch (const Error&) {
    // Shapes the graph rejects: run unplanned, so the failing node reports the problem itself.
  }
  memory.executor_ = this;
  memory.planned_ = true;
  ++memory.planCount_;
  if (memory.capacity_ < memory.plan_.arenaBytes) {
    checkPlanFitsTheLimit(memory.plan_, types, memory.signature_);
    memory.arena_.reset();  // free the smaller arena first
    memory.capacity_ = 0;
    void* p = allocateAligned(memory.plan_.arenaBytes);  // kArenaAlignment or more
    if (!p) {
      throw Error(ErrorCode::kRuntimeError, "out of memory allocating the " +
                                                std::to_string(memory.plan_.arenaBytes) +
                                                "-byte tensor arena");
    }
    memory.arena_ =
        std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
    memory.capacity_ = memory.plan_.arenaBytes;
  }
  if (!memory.plan_.offsets.empty()) bindNodes(memory, types);
}

void Executor::bindNodes(ExecutorMemory& memory, const std::vector<ir::TypeInfo>& types) const {
  const ir::Graph& g = *graph_;
  const MemoryPlan& plan = memory.plan_;
  const size_t n = g.values.size();
  memory.staticShapes_.assign(n, Shape{});
  memory.staticDtypes_.assign(n, DataType::kUndefined);
  memory.isStatic_.assign(n, 0);
  for (size_t id = 0; id < n && id < types.size(); ++id) {
    if (!isPlainTensor(types[id])) continue;
    memory.staticShapes_[id] = *ir::concreteShape(*types[id].shape);
    memory.staticDtypes_[id] = types[id].dtype;
    memory.isStatic_[id] = 1;
  }
  memory.fedIds_.clear();
  for (size_t s = 0; s < steps_.size(); ++s) {
    for (int id : steps_[s].node->inputs) {
      if (id == ir::kNoValue || producerOf_[static_cast<size_t>(id)].first >= 0) continue;
      if (g.value(id).constant && !g.isGraphInput(id)) continue;
      if (std::find(memory.fedIds_.begin(), memory.fedIds_.end(), id) == memory.fedIds_.end())
        memory.fedIds_.push_back(id);
    }
  }
  for (int id : g.outputs) {
    if (producerOf_[static_cast<size_t>(id)].first < 0 &&
        !(g.value(id).constant && !g.isGraphInput(id)) &&
        std::find(memory.fedIds_.begin(), memory.fedIds_.end(), id) == memory.fedIds_.end()) {
      memory.fedIds_.push_back(id);
    }
  }
  memory.fedSlots_.assign(memory.fedIds_.size(),
                          Tensor());  // never resized again: nodes point at them
  memory.fedPlaceholders_.assign(memory.fedIds_.size(), Tensor());
  for (size_t j = 0; j < memory.fedIds_.size(); ++j) {
    for (const auto& [id, shape] : memory.signature_)
      if (id == memory.fedIds_[j])
        memory.fedPlaceholders_[j] = Tensor::wrap(DataType::kUndefined, shape, nullptr, nullptr);
  }
  memory.nodes_.resize(steps_.size());  // never resized again: inputs point at other nodes' outputs
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ir::Node& node = *steps_[s].node;
    ExecutorMemory::NodeBinding& b = memory.nodes_[s];
    b.outputs.resize(node.outputs.size());
    b.planned.assign(node.outputs.size(), {});
    b.typesKnown = !hasInputsWithDefaults_;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue) continue;
      const auto i = static_cast<size_t>(id);
      if (plan.offsets[i] != MemoryPlan::kNotPlaced)
        b.planned[k] = {memory.arena_.get() + plan.offsets[i], plan.bytes[i], memory.arena_};
      b.typesKnown = b.typesKnown && memory.isStatic_[i];
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int id = node.inputs[k];
      if (id == ir::kNoValue) {
        b.inputs.push_back(nullptr);
        continue;
      }
      const ir::Value& v = g.value(id);
      const auto [step, index] = producerOf_[static_cast<size_t>(id)];
      if (step >= 0) {
        b.inputs.push_back(
            &memory.nodes_[static_cast<size_t>(step)].outputs[static_cast<size_t>(index)]);
      } else if (v.constant && !g.isGraphInput(id)) {
        b.inputs.push_back(&*v.constant);
      } else {
        const auto j =
            std::find(memory.fedIds_.begin(), memory.fedIds_.end(), id) - memory.fedIds_.begin();
        b.inputs.push_back(&memory.fedSlots_[static_cast<size_t>(j)]);
      }
      b.typesKnown = b.typesKnown && memory.isStatic_[static_cast<size_t>(id)];
    }
    if (b.typesKnown) {
      for (int id : node.outputs)
        b.outputTypes.push_back(id == ir::kNoValue ? ir::TypeInfo{}
                                                   : types[static_cast<size_t>(id)]);
    }
    b.inPlaceConcat = plan.inPlaceConcat[s];
    b.outputNames.clear();
    for (int id : node.outputs)
      b.outputNames.push_back(id == ir::kNoValue ? std::string() : g.value(id).name);
    b.context.emplace(node, b.inputs, b.outputs, b.outputTypes, &b.planned);
    b.context->setOutputNames(&b.outputNames);
    if (plan.workspaceBytes[s])
      b.context->setWorkspace(memory.arena_.get() + plan.workspaceOffsets[s],
                              plan.workspaceBytes[s]);
  }
  memory.callerOutputRoots_.clear();
  for (int id : g.outputs) {
    const int root = plan.storageOf[static_cast<size_t>(id)];
    if (producerOf_[static_cast<size_t>(root)].first < 0 ||
        plan.offsets[static_cast<size_t>(root)] != MemoryPlan::kNotPlaced ||
        std::find(memory.callerOutputRoots_.begin(), memory.callerOutputRoots_.end(), root) !=
            memory.callerOutputRoots_.end()) {
      continue;
    }
    memory.callerOutputRoots_.push_back(root);
  }
}

void Executor::placeCallerOutputs(const std::vector<std::pair<int, Tensor>>& inputs,
                                  ExecutorMemory& memory,
                                  const std::vector<OutputBuffer>& outputBuffers) const {
  const MemoryPlan& plan = memory.plan_;
  for (int root : memory.callerOutputRoots_) {
    const auto [step, index] = producerOf_[static_cast<size_t>(root)];
    cpu::OutputStorage& slot =
        memory.nodes_[static_cast<size_t>(step)].planned[static_cast<size_t>(index)];
    slot = {};
    // A graph output (or the tensor it is a view of) is computed in the caller's buffer when its
    // size is known now, it fits, and the buffer is not also an input being read.
    const uint64_t bytes = plan.bytes[static_cast<size_t>(root)];
    for (const OutputBuffer& buffer : outputBuffers) {
      if (plan.storageOf.at(static_cast<size_t>(buffer.valueId)) != root || !buffer.data ||
          bytes == 0 || bytes != plan.bytes[static_cast<size_t>(buffer.valueId)] ||
          (buffer.capacity && buffer.capacity < bytes)) {
        continue;
      }
      const auto* begin = static_cast<const uint8_t*>(buffer.data);
      bool overlapsInput = false;
      for (const auto& [id, tensor] : inputs) {
        const auto* in = static_cast<const uint8_t*>(tensor.raw());
        if (in && in < begin + bytes && begin < in + tensor.byteSize()) overlapsInput = true;
      }
      if (!overlapsInput) {
        slot = {buffer.data, bytes, nullptr};
        break;
      }
    }
  }
}

std::vector<Tensor> Executor::run(const std::vector<std::pair<int, Tensor>>& inputs,
                                  ExecutorMemory* memory,
                                  const std::vector<OutputBuffer>& outputBuffers,
                                  IProfiler* profiler) const {
  std::vector<Tensor> results;
  if (memory) {
    run(inputs, *memory, outputBuffers, profiler, results);
  } else {
    runUnplanned(inputs, profiler, results);
  }
  return results;
}

void Executor::run(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory,
                   const std::vector<OutputBuffer>& outputBuffers, IProfiler* profiler,
                   std::vector<Tensor>& results) const {
  preparePlan(inputs, memory);
  if (memory.nodes_.empty()) {
    runUnplanned(inputs, profiler, results);
    return;
  }
  placeCallerOutputs(inputs, memory, outputBuffers);
  runBound(inputs, memory, profiler, results);
}

namespace {

void reportLayer(IProfiler* profiler, const ir::Node& node, const std::string& kernel,
                 const std::vector<const Tensor*>& in,
                 std::chrono::steady_clock::time_point start) {
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  const std::string op = node.domain.empty() ? node.opType : node.domain + "::" + node.opType;
  profiler->reportLayerTime({node.name, op, describeInputShapes(in), elapsed.count(), kernel});
}

}  // namespace

void Executor::runBound(const std::vector<std::pair<int, Tensor>>& inputs, ExecutorMemory& memory,
                        IProfiler* profiler, std::vector<Tensor>& results) const {
  const ir::Graph& g = *graph_;
  const MemoryPlan& plan = memory.plan_;
  // Values the caller feeds: its tensors, else (inputs with a default) the graph's constant.
  for (size_t j = 0; j < memory.fedIds_.size(); ++j) {
    const int id = memory.fedIds_[j];
    const Tensor* value = g.value(id).constant ? &*g.value(id).constant : nullptr;
    for (const auto& [given, tensor] : inputs)
      if (given == id) value = &tensor;
    if (value) {
      memory.fedSlots_[j] = *value;
    } else {
      memory.fedSlots_[j] = Tensor();
    }
  }
  uint8_t* const arena = memory.arena_.get();
  const auto arenaBegin = reinterpret_cast<uintptr_t>(arena);
  const auto arenaEnd = arenaBegin + memory.capacity_;
  const auto inArena = [&](const void* p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    return arena && address >= arenaBegin && address < arenaEnd;
  };

  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    const ir::Node& node = *step.node;
    if (cpu::terminateRequested())
      cpu::throwTerminated("node '" + node.name + "' (" + node.opType + ")");
    ExecutorMemory::NodeBinding& b = memory.nodes_[s];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.inputs[k] != ir::kNoValue && !b.inputs[k]->defined()) {
        ir::failNode(node,
                     "input '" + g.value(node.inputs[k]).name + "' has no value (internal error)",
                     ErrorCode::kRuntimeError);
      }
    }
    const auto start =
        profiler ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    // The shapes the plan resolved hold while the inputs have the shapes it saw.
    bool typesKnown = b.typesKnown;
    for (size_t k = 0; typesKnown && k < node.inputs.size(); ++k) {
      const int id = node.inputs[k];
      if (id == ir::kNoValue) continue;
      const Tensor& t = *b.inputs[k];
      typesKnown = !t.isSequence() && !t.isNone() &&
                   t.dtype() == memory.staticDtypes_[static_cast<size_t>(id)] &&
                   t.shape() == memory.staticShapes_[static_cast<size_t>(id)];
    }
    if (typesKnown && step.rules->outputViewsInput0 && node.outputs.size() == 1 && b.inputs[0] &&
        isViewOf(b.outputs[0], *b.inputs[0], b.outputTypes[0].dtype,
                 memory.staticShapes_[static_cast<size_t>(node.outputs[0])])) {
      // A Reshape-like node whose view from the last run still holds: nothing to do.
      if (profiler) reportLayer(profiler, node, choices_[s].id, b.inputs, start);
      continue;
    }
    // Outputs in a planned slot are views made once and kept while they still fit the slot; the
    // others are made by the kernel.
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      Tensor& out = b.outputs[k];
      if (id == ir::kNoValue || !typesKnown || !b.planned[k].data) {
        out = Tensor();
        continue;
      }
      const Shape& shape = memory.staticShapes_[static_cast<size_t>(id)];
      const DataType dtype = b.outputTypes[k].dtype;
      if (out.raw() != b.planned[k].data || out.dtype() != dtype || out.shape() != shape) {
        out = Tensor::wrap(dtype, shape, b.planned[k].data, b.planned[k].owner);
      }
    }
    if (typesKnown && b.inPlaceConcat && b.planned[0].data) {
      // Its inputs were computed at their slabs of the output; one that a kernel could not put
      // there (it made its output elsewhere) is copied in.
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const Tensor& in = *b.inputs[k];
        uint8_t* slab = arena + plan.offsets[static_cast<size_t>(node.inputs[k])];
        if (in.raw() != slab && in.byteSize()) std::memcpy(slab, in.raw(), in.byteSize());
      }
      if (profiler) reportLayer(profiler, node, choices_[s].id, b.inputs, start);
      continue;
    }
    if (!typesKnown) inferOutputTypes(node, *step.schema, b.inputs, b.outputTypes);
    if (b.inPlaceConcat) {
      // Planned in place but the inputs are not as planned: copy into a tensor of its own, as
      // the output's slot holds the inputs.
      const cpu::OutputStorage slot = std::exchange(b.planned[0], {});
      b.outputs[0] = Tensor();
      callKernel(node, step.kernel, *b.context);
      b.planned[0] = slot;
    } else {
      callKernel(node, step.kernel, *b.context);
    }
    if (!typesKnown && b.typesKnown) b.typesKnown = false;  // its resolved types were overwritten
    checkOutputsMade(node, b.outputs);
    if (profiler) reportLayer(profiler, node, choices_[s].id, b.inputs, start);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue || !inArena(b.outputs[k].raw())) continue;
      // In the arena, a tensor may only live in its own slot (or its source's, for a view):
      // any other slot is reused by the plan once its lifetime ends.
      const auto root = static_cast<size_t>(plan.storageOf[static_cast<size_t>(id)]);
      const bool ownSlot = plan.offsets[root] != MemoryPlan::kNotPlaced &&
                           b.outputs[k].raw() == arena + plan.offsets[root];
      if (!ownSlot) b.outputs[k] = b.outputs[k].clone();
    }
    // Heap tensors are freed after their last use; views of the arena are kept for the next run.
    for (int id : step.release) {
      const auto [producer, index] = producerOf_[static_cast<size_t>(id)];
      if (producer < 0) continue;
      Tensor& t = memory.nodes_[static_cast<size_t>(producer)].outputs[static_cast<size_t>(index)];
      if (!inArena(t.raw())) t = Tensor();
    }
  }

  results.resize(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const int id = g.outputs[i];
    const auto [producer, index] = producerOf_[static_cast<size_t>(id)];
    if (producer >= 0) {
      results[i] = memory.nodes_[static_cast<size_t>(producer)].outputs[static_cast<size_t>(index)];
    } else if (auto j = std::find(memory.fedIds_.begin(), memory.fedIds_.end(), id);
               j != memory.fedIds_.end()) {
      results[i] = memory.fedSlots_[static_cast<size_t>(j - memory.fedIds_.begin())];
    } else {
      results[i] = *g.value(id).constant;
    }
  }
  // The caller holds the outputs now: drop the references to heap tensors and to its inputs.
  for (int id : g.outputs) {
    const auto [producer, index] = producerOf_[static_cast<size_t>(id)];
    if (producer < 0) continue;
    ExecutorMemory::NodeBinding& b = memory.nodes_[static_cast<size_t>(producer)];
    Tensor& t = b.outputs[static_cast<size_t>(index)];
    if (!inArena(t.raw()) && t.raw() != b.planned[static_cast<size_t>(index)].data) t = Tensor();
  }
  for (size_t j = 0; j < memory.fedSlots_.size(); ++j)
    memory.fedSlots_[j] = memory.fedPlaceholders_[j];
}

void Executor::runUnplanned(const std::vector<std::pair<int, Tensor>>& inputs, IProfiler* profiler,
                            std::vector<Tensor>& results) const {
  const ir::Graph& g = *graph_;
  // Per value id: its tensor, pointing at the graph's constants and the caller's inputs.
  std::vector<Tensor> computed(g.values.size());
  std::vector<const Tensor*> values(g.values.size(), nullptr);
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant) values[i] = &*g.values[i].constant;
  for (const auto& [id, tensor] : inputs) values[static_cast<size_t>(id)] = &tensor;

  std::vector<const Tensor*> in;
  for (const Step& step : steps_) {
    const ir::Node& node = *step.node;
    in.clear();
    for (int id : node.inputs) {
      if (id != ir::kNoValue && (!values[id] || !values[id]->defined())) {
        ir::failNode(node, "input '" + g.value(id).name + "' has no value (internal error)",
                     ErrorCode::kRuntimeError);
      }
      in.push_back(id == ir::kNoValue ? nullptr : values[id]);
    }
    if (cpu::terminateRequested())
      cpu::throwTerminated("node '" + node.name + "' (" + node.opType + ")");
    const auto start =
        profiler ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    std::vector<Tensor> outs = runNode(node, *step.schema, step.kernel, in);
    if (profiler)
      reportLayer(profiler, node, choices_[static_cast<size_t>(&step - steps_.data())].id, in,
                  start);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int id = node.outputs[k];
      if (id == ir::kNoValue) continue;
      computed[id] = std::move(outs[k]);
      values[id] = &computed[id];
    }
    for (int id : step.release) {
      computed[id] = Tensor();
      values[id] = nullptr;
    }
  }
  results.clear();
  for (int id : g.outputs) results.push_back(values[id] ? *values[id] : Tensor());
}

}  // namespace kiln
