#include "engine/memory_plan.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "ir/node_attrs.h"
#include "ir/op_schema.h"

namespace kiln {

namespace {

uint64_t alignUp(uint64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

uint64_t concreteBytes(const ir::TypeInfo& type) {
  if (!type.shape || type.dtype == DataType::kUndefined || type.dtype == DataType::kString)
    return 0;
  auto shape = ir::concreteShape(*type.shape);
  if (!shape) return 0;  // depends on data: not known before the run
  uint64_t n = 1;
  for (int64_t d : *shape) {
    if (d < 0) return 0;
    n *= static_cast<uint64_t>(d);
  }
  return n * dataTypeSize(type.dtype);
}

// A tensor to place: its storage's size and the steps from its producer to its last reader.
struct Interval {
  int id;
  uint64_t size;  // aligned
  int first;
  int last;
  bool overlaps(const Interval& o) const { return first <= o.last && o.first <= last; }
};

// Where an input of a Concat computed in place lives: inside the Concat output's slot.
struct Slab {
  int container = -1;   // the Concat output whose slot holds it, -1 if none
  uint64_t offset = 0;  // bytes from the start of that slot
};

std::optional<Shape> staticShapeOf(const ir::TypeInfo& type) {
  if (!type.shape || type.isSequence || type.isOptional) return std::nullopt;
  return ir::concreteShape(*type.shape);
}

// What planMemory knows of every value when it looks for Concats to compute in place.
struct Lifetimes {
  const std::vector<ir::TypeInfo>& types;  // per value id
  const std::vector<int>& producer;
  const std::vector<bool>& excluded;  // roots handed to the caller
};

// A tensor that may live in another's slot: made by a node, in the arena, with its own storage.
bool ownsArenaSlot(const ir::Graph& graph, const MemoryPlan& plan, const Lifetimes& life, int id) {
  const auto i = static_cast<size_t>(id);
  return id != ir::kNoValue && plan.storageOf[i] == id && life.producer[i] >= 0 &&
         !life.excluded[i] && !graph.values[i].constant && plan.bytes[i] > 0;
}

// The slab of each input of `node` in its output when the Concat can be computed in place:
// static shapes, one dtype, every output dim before the axis 1 (so each input is one contiguous
// block), every input a distinct tensor of the arena not already inside another Concat, and
// slabs starting on the arena's alignment. Empty when it cannot.
std::vector<uint64_t> concatSlabs(const ir::Graph& graph, const MemoryPlan& plan,
                                  const Lifetimes& life, const std::vector<Slab>& slabs,
                                  const std::vector<bool>& isContainer, const ir::Node& node) {
  if ((!node.domain.empty() && node.domain != "ai.onnx") || node.opType != "Concat" ||
      node.outputs.size() != 1 || node.inputs.size() < 2) {
    return {};
  }
  const int out = node.outputs[0];
  if (!ownsArenaSlot(graph, plan, life, out) || isContainer[static_cast<size_t>(out)]) return {};
  const ir::TypeInfo& outType = life.types[static_cast<size_t>(out)];
  const auto outShape = staticShapeOf(outType);
  if (!outShape || outShape->empty()) return {};
  const auto rank = static_cast<int64_t>(outShape->size());
  int64_t axis = ir::attrInt(node, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return {};
  for (int64_t d = 0; d < axis; ++d)
    if ((*outShape)[static_cast<size_t>(d)] != 1) return {};

  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const int id = node.inputs[k];
    if (!ownsArenaSlot(graph, plan, life, id) || slabs[static_cast<size_t>(id)].container >= 0 ||
        isContainer[static_cast<size_t>(id)] ||
        std::count(node.inputs.begin(), node.inputs.end(), id) > 1) {
      return {};
    }
    const ir::TypeInfo& type = life.types[static_cast<size_t>(id)];
    const auto shape = staticShapeOf(type);
    if (type.dtype != outType.dtype || !shape || shape->size() != outShape->size()) return {};
    for (size_t d = 0; d < shape->size(); ++d)
      if (static_cast<int64_t>(d) != axis && (*shape)[d] != (*outShape)[d]) return {};
    if (offset % kArenaAlignment != 0) return {};
    offsets.push_back(offset);
    offset += plan.bytes[static_cast<size_t>(id)];
  }
  if (offset != plan.bytes[static_cast<size_t>(out)]) return {};
  return offsets;
}

// The rules of node i's kernel: the given kernels', else what the registry would choose.
class RulesOf {
 public:
  RulesOf(const ir::Graph& graph, const KernelMemoryNeeds* kernels) : kernels_(kernels) {
    if (kernels_) return;
    for (const ir::Node& node : graph.nodes) own_.push_back(kernelMemoryRules(graph, node));
  }
  const cpu::KernelMemoryRules& operator()(size_t node) const {
    static const cpu::KernelMemoryRules none;
    if (!kernels_) return own_[node];
    const cpu::KernelMemoryRules* r =
        node < kernels_->rules.size() ? kernels_->rules[node] : nullptr;
    return r ? *r : none;
  }

 private:
  const KernelMemoryNeeds* kernels_;
  std::vector<cpu::KernelMemoryRules> own_;
};

// Whether output `index` of node i is a view of its first input.
bool viewsInput(const RulesOf& rules, size_t node, size_t index) {
  return index == 0 && rules(node).outputViewsInput0;
}

// The scratch bytes node i's kernel declares at the graph's (resolved) input shapes.
uint64_t workspaceOf(const ir::Graph& graph, const std::vector<ir::TypeInfo>& types,
                     const KernelMemoryNeeds* kernels, size_t i) {
  if (!kernels || i >= kernels->workspaces.size() || !kernels->workspaces[i]) return 0;
  std::vector<Shape> shapes;
  const ir::Node& node = graph.nodes[i];
  shapes.reserve(node.inputs.size());
  std::vector<const Shape*> pointers;
  for (int id : node.inputs) {
    std::optional<Shape> shape =
        id == ir::kNoValue ? std::nullopt : staticShapeOf(types[static_cast<size_t>(id)]);
    shapes.push_back(shape ? *shape : Shape{});
    pointers.push_back(shape ? &shapes.back() : nullptr);
  }
  return kernels->workspaces[i](pointers, kernels->threads);
}

}  // namespace

cpu::KernelMemoryRules kernelMemoryRules(const ir::Graph& graph, const ir::Node& node) {
  cpu::KernelCreateInfo info{node, {}, {}, {}};
  for (int id : node.inputs) {
    const ir::Value* v = id == ir::kNoValue ? nullptr : &graph.value(id);
    info.inputTypes.push_back(v ? &v->type : nullptr);
    info.constants.push_back(v && v->constant && !graph.isGraphInput(id) ? &*v->constant : nullptr);
  }
  const cpu::KernelSelection s = cpu::KernelRegistry::global().select(info);
  return s.chosen ? s.chosen->memory : cpu::KernelMemoryRules{};
}

MemoryPlan planMemory(const ir::Graph& graph, const KernelMemoryNeeds* kernels) {
  std::vector<ir::TypeInfo> types;
  for (const ir::Value& v : graph.values) types.push_back(v.type);
  return planMemory(graph, types, kernels);
}

MemoryPlan planMemory(const ir::Graph& graph, const std::vector<ir::TypeInfo>& types,
                      const KernelMemoryNeeds* kernels) {
  const size_t n = graph.values.size();
  const int end = static_cast<int>(graph.nodes.size());
  MemoryPlan plan;
  plan.offsets.assign(n, MemoryPlan::kNotPlaced);
  plan.bytes.assign(n, 0);
  plan.storageOf.resize(n);
  for (size_t id = 0; id < n; ++id) {
    plan.storageOf[id] = static_cast<int>(id);
    plan.bytes[id] = concreteBytes(types[id]);
  }

  const RulesOf rules(graph, kernels);
  std::vector<int> producer(n, -1), lastUse(n, -1);
  for (int i = 0; i < end; ++i) {
    const ir::Node& node = graph.nodes[static_cast<size_t>(i)];
    for (int id : node.inputs)
      if (id != ir::kNoValue) lastUse[static_cast<size_t>(id)] = i;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      int id = node.outputs[k];
      if (id == ir::kNoValue) continue;
      producer[static_cast<size_t>(id)] = i;
      if (viewsInput(rules, static_cast<size_t>(i), k) && !node.inputs.empty() &&
          node.inputs[0] != ir::kNoValue) {
        plan.storageOf[static_cast<size_t>(id)] =
            plan.storageOf[static_cast<size_t>(node.inputs[0])];
      }
    }
  }
  for (int id : graph.outputs) lastUse[static_cast<size_t>(id)] = end;

  // A storage lives from its producer until the last reader of any value sharing it.
  std::vector<int> storageLast(n, -1);
  std::vector<bool> excluded(n, false);
  for (size_t id = 0; id < n; ++id) {
    size_t root = static_cast<size_t>(plan.storageOf[id]);
    storageLast[root] = std::max({storageLast[root], lastUse[id], producer[id]});
    if (lastUse[id] == end) excluded[root] = true;  // a graph output: handed to the caller
  }
  // Concats computed in place: their inputs go inside the output's slot, which then lives from
  // the first input's producer to the last reader of the output or of any input.
  std::vector<Slab> slabs(n);
  std::vector<bool> isContainer(n, false);
  std::vector<int> storageFirst = producer;
  plan.inPlaceConcat.assign(static_cast<size_t>(end), false);
  const Lifetimes life{types, producer, excluded};
  for (int i = 0; i < end; ++i) {
    const ir::Node& node = graph.nodes[static_cast<size_t>(i)];
    std::vector<uint64_t> offsets = concatSlabs(graph, plan, life, slabs, isContainer, node);
    if (offsets.empty()) continue;
    const auto out = static_cast<size_t>(node.outputs[0]);
    isContainer[out] = true;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const auto id = static_cast<size_t>(node.inputs[k]);
      slabs[id] = {static_cast<int>(out), offsets[k]};
      storageFirst[out] = std::min(storageFirst[out], producer[id]);
      storageLast[out] = std::max(storageLast[out], storageLast[id]);
    }
    plan.inPlaceConcat[static_cast<size_t>(i)] = true;
    ++plan.inPlaceConcats;
    plan.inPlaceConcatBytes += plan.bytes[out];
  }

  // Outputs computed in place of an input that dies at their node (as ONNX Runtime does): same
  // bytes and type, the input's storage read by no later node and by no other input of this one.
  // The output then shares the input's slot, which lives on to the output's last reader.
  plan.inPlaceOutputs = 0;
  const auto arenaOwned = [&](int id) {
    const auto i = static_cast<size_t>(id);
    return ownsArenaSlot(graph, plan, life, id) && slabs[i].container < 0 && !isContainer[i];
  };
  for (int i = 0; i < end; ++i) {
    const ir::Node& node = graph.nodes[static_cast<size_t>(i)];
    const std::vector<size_t>& candidates = rules(static_cast<size_t>(i)).inPlaceInputs;
    if (candidates.empty() || node.outputs.size() != 1 || !arenaOwned(node.outputs[0])) continue;
    const int out = node.outputs[0];
    for (size_t k : candidates) {
      if (k >= node.inputs.size() || node.inputs[k] == ir::kNoValue) continue;
      const int in = node.inputs[k];
      const int root = plan.storageOf[static_cast<size_t>(in)];
      const auto r = static_cast<size_t>(root);
      bool shared = false;
      for (size_t j = 0; j < node.inputs.size(); ++j)
        shared |= j != k && node.inputs[j] != ir::kNoValue &&
                  plan.storageOf[static_cast<size_t>(node.inputs[j])] == root;
      if (shared || !arenaOwned(root) || storageLast[r] != i ||
          plan.bytes[r] != plan.bytes[static_cast<size_t>(out)] ||
          plan.bytes[static_cast<size_t>(in)] != plan.bytes[r] ||
          types[static_cast<size_t>(in)].dtype != types[static_cast<size_t>(out)].dtype) {
        continue;
      }
      for (int& s : plan.storageOf)
        if (s == out) s = root;  // out itself, and the views of it
      storageLast[r] = std::max(storageLast[r], storageLast[static_cast<size_t>(out)]);
      ++plan.inPlaceOutputs;
      break;
    }
  }

  std::vector<Interval> intervals;
  for (size_t id = 0; id < n; ++id) {
    const ir::Value& v = graph.values[id];
    if (plan.storageOf[id] != static_cast<int>(id) || producer[id] < 0 || excluded[id] ||
        v.constant || plan.bytes[id] == 0 || slabs[id].container >= 0) {
      continue;
    }
    intervals.push_back(
        {static_cast<int>(id), alignUp(plan.bytes[id]), storageFirst[id], storageLast[id]});
  }
  // Each kernel's workspace lives for its node only; its pseudo id is n + the node's index.
  plan.workspaceOffsets.assign(static_cast<size_t>(end), MemoryPlan::kNotPlaced);
  plan.workspaceBytes.assign(static_cast<size_t>(end), 0);
  for (int i = 0; i < end; ++i) {
    const uint64_t bytes = workspaceOf(graph, types, kernels, static_cast<size_t>(i));
    if (bytes == 0) continue;
    plan.workspaceBytes[static_cast<size_t>(i)] = bytes;
    plan.largestWorkspace = std::max(plan.largestWorkspace, bytes);
    intervals.push_back({static_cast<int>(n) + i, alignUp(bytes), i, i});
  }
  std::stable_sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return a.size != b.size ? a.size > b.size : a.first < b.first;
  });

  std::vector<const Interval*> placed;
  std::vector<int64_t> slot(n + static_cast<size_t>(end),
                            MemoryPlan::kNotPlaced);  // per interval id
  std::vector<std::pair<uint64_t, uint64_t>>
      busy;  // [offset, offset + size) of overlapping placed tensors
  for (const Interval& t : intervals) {
    busy.clear();
    for (const Interval* p : placed) {
      if (!p->overlaps(t)) continue;
      uint64_t offset = static_cast<uint64_t>(slot[static_cast<size_t>(p->id)]);
      busy.emplace_back(offset, offset + p->size);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t best = std::numeric_limits<uint64_t>::max(),
             bestGap = std::numeric_limits<uint64_t>::max();
    uint64_t cursor = 0;
    for (const auto& [begin, finish] : busy) {
      if (begin > cursor && begin - cursor >= t.size && begin - cursor < bestGap) {
        best = cursor;
        bestGap = begin - cursor;
      }
      cursor = std::max(cursor, finish);
    }
    if (best == std::numeric_limits<uint64_t>::max())
      best = cursor;  // no gap fits: after the last one
    slot[static_cast<size_t>(t.id)] = static_cast<int64_t>(best);
    plan.arenaBytes = std::max(plan.arenaBytes, best + t.size);
    placed.push_back(&t);
    if (static_cast<size_t>(t.id) >= n) {
      plan.workspaceOffsets[static_cast<size_t>(t.id) - n] = static_cast<int64_t>(best);
      continue;
    }
    plan.offsets[static_cast<size_t>(t.id)] = static_cast<int64_t>(best);
    plan.intermediateBytes += t.size;
    ++plan.placedTensors;
  }
  for (size_t id = 0; id < n; ++id) {
    if (slabs[id].container < 0) continue;
    const int64_t base = plan.offsets[static_cast<size_t>(slabs[id].container)];
    plan.offsets[id] = base + static_cast<int64_t>(slabs[id].offset);
  }
  // Outputs computed in place get their input's slot; views stay unplaced (their kernels hand the
  // source's storage on).
  for (size_t id = 0; id < n; ++id) {
    const auto root = static_cast<size_t>(plan.storageOf[id]);
    if (root != id && producer[id] >= 0 &&
        !viewsInput(rules, static_cast<size_t>(producer[id]), 0) &&
        plan.bytes[id] == plan.bytes[root]) {
      plan.offsets[id] = plan.offsets[root];
      plan.intermediateBytes += alignUp(plan.bytes[id]);
    }
  }
  return plan;
}

MemoryPlan planMemoryForInputShapes(const ir::Graph& graph, const ShapeProgram& shapes,
                                    const std::vector<std::pair<int, Shape>>& inputShapes,
                                    std::vector<ir::TypeInfo>* resolvedTypes,
                                    const KernelMemoryNeeds* kernels) {
  ShapeProgram::Resolution resolved = shapes.resolve(inputShapes);
  MemoryPlan plan = planMemory(graph, resolved.types, kernels);
  if (resolvedTypes) *resolvedTypes = std::move(resolved.types);
  return plan;
}

MemoryPlan planMemoryForInputShapes(const ir::Graph& graph,
                                    const std::vector<std::pair<int, Shape>>& inputShapes,
                                    std::vector<ir::TypeInfo>* resolvedTypes,
                                    const KernelMemoryNeeds* kernels) {
  return planMemoryForInputShapes(graph, ShapeProgram(graph), inputShapes, resolvedTypes, kernels);
}

MemoryPlan planMemoryAtProfile(const plan::Plan& plan, int profile, OptProfileSelector which) {
  std::vector<std::pair<int, Shape>> shapes;
  for (const plan::IOTensor& t : plan.io) {
    if (t.mode != TensorIOMode::kINPUT || t.hasDefault) continue;
    const plan::ProfileEntry* range = profile < static_cast<int>(plan.profiles.size())
                                          ? plan.profiles[static_cast<size_t>(profile)].find(t.name)
                                          : nullptr;
    shapes.emplace_back(t.valueId, range ? range->dims[static_cast<int>(which)] : t.dims);
  }
  return planMemoryForInputShapes(*plan.graph, shapes);
}

}  // namespace kiln
