// Common-subexpression elimination: a deterministic node with the same op, attributes and
// inputs as an earlier one computes the same outputs, so its readers read the earlier node's.
#include <cstring>
#include <map>

#include "ir/op_schema.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

// A key identifying what a node computes; nullopt for nodes that must not be merged (random,
// subgraph or tensor attributes, omitted outputs).
std::optional<std::string> nodeKey(const ir::Node& node) {
  const ir::OpSchema* schema =
      ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
  if (!schema || !schema->deterministic || node.outputs.empty() || node.explicitInputs >= 0)
    return std::nullopt;
  std::string key = node.domain + "|" + node.opType + "|" + std::to_string(node.opset) + "|";
  for (int id : node.inputs) key += std::to_string(id) + ",";
  for (const auto& [name, attr] : node.attrs) {
    if (name == kFusedFromAttr) continue;
    key += "|" + name + "=";
    if (auto* i = std::get_if<int64_t>(&attr)) {
      key += std::to_string(*i);
    } else if (auto* f = std::get_if<float>(&attr)) {
      uint32_t bits;
      std::memcpy(&bits, f, sizeof bits);
      key += "f" + std::to_string(bits);
    } else if (auto* s = std::get_if<std::string>(&attr)) {
      key += "s" + std::to_string(s->size()) + ":" + *s;
    } else if (auto* is = std::get_if<std::vector<int64_t>>(&attr)) {
      for (int64_t v : *is) key += std::to_string(v) + ",";
    } else if (auto* fs = std::get_if<std::vector<float>>(&attr)) {
      for (float v : *fs) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        key += std::to_string(bits) + ",";
      }
    } else if (auto* ss = std::get_if<std::vector<std::string>>(&attr)) {
      for (const auto& v : *ss) key += std::to_string(v.size()) + ":" + v + ",";
    } else {
      return std::nullopt;
    }
  }
  return key;
}

}  // namespace

int eliminateCommonSubexpressions(ir::Graph& graph) {
  std::vector<bool> removed(graph.nodes.size(), false);
  std::map<std::string, size_t> seen;
  std::vector<int> replacement(graph.values.size());
  for (size_t v = 0; v < replacement.size(); ++v) replacement[v] = static_cast<int>(v);
  for (size_t i = 0; i < graph.nodes.size();
       ++i) {  // topological order: inputs are already renamed
    ir::Node& node = graph.nodes[i];
    for (int& id : node.inputs) {
      if (id != ir::kNoValue) id = replacement[static_cast<size_t>(id)];
    }
    std::optional<std::string> key = nodeKey(node);
    if (!key) continue;
    auto [it, inserted] = seen.emplace(*key, i);
    if (inserted) continue;
    const ir::Node& kept = graph.nodes[it->second];  // outputs checked before it is modified
    bool outputsFree = kept.outputs.size() == node.outputs.size();
    for (size_t k = 0; k < node.outputs.size() && outputsFree; ++k) {
      outputsFree = node.outputs[k] == ir::kNoValue ||
                    (kept.outputs[k] != ir::kNoValue && !isGraphOutput(graph, node.outputs[k]));
    }
    if (!outputsFree) continue;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k] != ir::kNoValue)
        replacement[static_cast<size_t>(node.outputs[k])] = kept.outputs[k];
    }
    recordFusion(graph.nodes[it->second], node);  // the duplicate lives on as the kept node
    removed[i] = true;
  }
  return dropNodes(graph, removed);
}

}  // namespace kiln::opt
