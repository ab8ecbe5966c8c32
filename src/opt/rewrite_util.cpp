#include "opt/rewrite_util.h"

#include <algorithm>

#include "ir/node_attrs.h"

namespace kiln::opt {

std::vector<std::vector<int>> consumersOf(const ir::Graph& graph) {
  std::vector<std::vector<int>> consumers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int id : graph.nodes[i].inputs) {
      if (id == ir::kNoValue) continue;
      auto& list = consumers[static_cast<size_t>(id)];
      if (list.empty() || list.back() != static_cast<int>(i)) list.push_back(static_cast<int>(i));
    }
  }
  return consumers;
}

bool isGraphOutput(const ir::Graph& graph, int valueId) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), valueId) != graph.outputs.end();
}

bool onlyReadBy(const ir::Graph& graph, const std::vector<std::vector<int>>& consumers,
                int valueId) {
  return consumers[static_cast<size_t>(valueId)].size() == 1 && !isGraphOutput(graph, valueId);
}

const Tensor* constantValue(const ir::Graph& graph, int valueId) {
  if (valueId == ir::kNoValue) return nullptr;
  const ir::Value& v = graph.value(valueId);
  return v.constant && !graph.isGraphInput(valueId) ? &*v.constant : nullptr;
}

std::optional<float> scalarConstant(const ir::Graph& graph, int valueId) {
  const Tensor* t = constantValue(graph, valueId);
  if (!t || t->dtype() != DataType::kFloat32 || t->numel() != 1) return std::nullopt;
  return t->data<float>()[0];
}

bool isFloat32(const ir::Graph& graph, int valueId) {
  return valueId != ir::kNoValue && graph.value(valueId).type.dtype == DataType::kFloat32;
}

bool sameKnownShape(const ir::Graph& graph, int a, int b) {
  const auto& sa = graph.value(a).type.shape;
  const auto& sb = graph.value(b).type.shape;
  if (!sa || !sb || sa->size() != sb->size()) return false;
  for (size_t i = 0; i < sa->size(); ++i) {
    const ir::Dim& x = (*sa)[i];
    const ir::Dim& y = (*sb)[i];
    const bool same = x.isKnown() ? x.value == y.value
                                  : (!x.symbol.empty() && x.symbol == y.symbol && !y.isKnown());
    if (!same) return false;
  }
  return true;
}

void recordFusion(ir::Node& into, const ir::Node& absorbed) {
  std::vector<std::string> names = ir::hasAttr(into, kFusedFromAttr)
                                       ? ir::attrStrings(into, kFusedFromAttr)
                                       : std::vector<std::string>{into.name};
  if (ir::hasAttr(absorbed, kFusedFromAttr)) {
    for (const std::string& n : ir::attrStrings(absorbed, kFusedFromAttr)) names.push_back(n);
  } else {
    names.push_back(absorbed.name);
  }
  into.attrs[kFusedFromAttr] = names;
}

int addConstant(ir::Graph& graph, const std::string& base, Tensor tensor) {
  std::string name = base;
  for (int k = 1; graph.findValue(name) >= 0; ++k) name = base + "_" + std::to_string(k);
  const int id = graph.addValue(name, ir::TypeInfo{tensor.dtype(), ir::symShapeOf(tensor.shape())});
  graph.value(id).constant = std::move(tensor);
  return id;
}

int dropNodes(ir::Graph& graph, const std::vector<bool>& removed) {
  std::vector<ir::Node> kept;
  int dropped = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (removed[i]) {
      ++dropped;
    } else {
      kept.push_back(std::move(graph.nodes[i]));
    }
  }
  graph.nodes = std::move(kept);
  ir::sortTopologically(graph);
  return dropped;
}

}  // namespace kiln::opt
