#include "build/memory_estimate.h"

#include <algorithm>

namespace kiln::build {

namespace {

uint64_t valueBytes(const ir::Value& v) {
  if (!v.type.shape || v.type.dtype == DataType::kUndefined) return 0;
  auto shape = ir::concreteShape(*v.type.shape);
  if (!shape) return 0;  // data-dependent: not counted
  uint64_t n = 1;
  for (int64_t d : *shape) n *= static_cast<uint64_t>(d);
  return (n * dataTypeSize(v.type.dtype) + 63) / 64 * 64;
}

}  // namespace

uint64_t peakIntermediateBytes(const ir::Graph& graph) {
  const int end = static_cast<int>(graph.nodes.size());
  std::vector<int> lastUse(graph.values.size(), -1);
  for (int i = 0; i < end; ++i)
    for (int id : graph.nodes[static_cast<size_t>(i)].inputs)
      if (id != ir::kNoValue) lastUse[static_cast<size_t>(id)] = i;
  for (int id : graph.outputs) lastUse[static_cast<size_t>(id)] = end;
  uint64_t live = 0, peak = 0;
  std::vector<uint64_t> held(graph.values.size(), 0);
  for (int i = 0; i < end; ++i) {
    const ir::Node& node = graph.nodes[static_cast<size_t>(i)];
    for (int id : node.outputs) {
      if (id == ir::kNoValue) continue;
      held[static_cast<size_t>(id)] = valueBytes(graph.value(id));
      live += held[static_cast<size_t>(id)];
    }
    peak = std::max(peak, live);
    auto release = [&](int id) {
      live -= held[static_cast<size_t>(id)];
      held[static_cast<size_t>(id)] = 0;
    };
    for (int id : node.inputs)
      if (id != ir::kNoValue && lastUse[static_cast<size_t>(id)] == i) release(id);
    for (int id : node.outputs)
      if (id != ir::kNoValue && lastUse[static_cast<size_t>(id)] == -1) release(id);
  }
  return peak;
}

}  // namespace kiln::build
