#include "engine/plan_plugins.h"

#include <functional>
#include <set>

#include "kiln/plugin.h"
#include "plugin/plugin_node.h"

namespace kiln::plan {

namespace {

// Visits every node depth-first: a node, then the bodies of its graph attributes (in attribute
// name order). A node's position in this order identifies it in the plugins section.
void forEachNode(ir::Graph& graph, const std::function<void(ir::Node&)>& fn) {
  for (ir::Node& node : graph.nodes) {
    fn(node);
    for (auto& [name, attr] : node.attrs) {
      if (auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr)) forEachNode(**g, fn);
      if (auto* gs = std::get_if<std::vector<std::shared_ptr<ir::Graph>>>(&attr))
        for (auto& g : *gs) forEachNode(*g, fn);
    }
  }
}

}  // namespace

bool hasPluginNodes(const ir::Graph& graph) {
  bool any = false;
  forEachNode(const_cast<ir::Graph&>(graph), [&](ir::Node& n) { any = any || n.plugin; });
  return any;
}

void writePlugins(ByteWriter& w, const ir::Graph& graph) {
  std::vector<std::pair<uint32_t, const ir::Node*>> plugins;
  uint32_t ordinal = 0;
  forEachNode(const_cast<ir::Graph&>(graph), [&](ir::Node& n) {
    if (n.plugin) plugins.emplace_back(ordinal, &n);
    ++ordinal;
  });
  w.u32(static_cast<uint32_t>(plugins.size()));
  for (const auto& [index, node] : plugins) {
    const IPlugin& p = *node->plugin;
    std::vector<uint8_t> bytes;
    try {
      bytes = p.serialize();
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kRuntimeError, node->label() + ": " + plugin::pluginLabel(p) +
                                                " serialize() failed: " + e.what());
    }
    w.u32(index);
    w.str(p.getPluginName());
    w.str(p.getPluginVersion());
    w.str(p.getPluginNamespace());
    w.str(std::string(bytes.begin(), bytes.end()));
  }
}

void readPlugins(ByteReader r, ir::Graph& graph) {
  std::vector<ir::Node*> nodes;
  forEachNode(graph, [&](ir::Node& n) { nodes.push_back(&n); });
  const uint32_t count = r.count("plugin", 20);
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t index = r.u32("plugin node index");
    const std::string name = r.str("plugin name");
    const std::string version = r.str("plugin version");
    const std::string ns = r.str("plugin namespace");
    const std::string bytes = r.str("plugin data");
    if (index >= nodes.size() || !seen.insert(index).second) {
      r.fail("plugin '" + name + "' names node " + std::to_string(index) + " of " +
             std::to_string(nodes.size()));
    }
    ir::Node& node = *nodes[index];
    const std::string who =
        "plugin '" + name + "' (version '" + version + "', namespace '" + ns + "')";
    auto creator = PluginRegistry::global().getCreator(name, version, ns);
    if (!creator) {
      throw Error(ErrorCode::kUnsupportedNode,
                  "the plan needs " + who + " for " + node.label() +
                      ", which is not registered; plugin libraries searched: " +
                      plugin::searchedLibrariesText());
    }
    std::unique_ptr<IPlugin> made;
    try {
      made = creator->deserializePlugin(node.name, bytes.data(), bytes.size());
    } catch (const std::exception& e) {
      throw Error(
          ErrorCode::kInvalidPlan,
          node.label() + ": " + who + " could not be re-created from the plan: " + e.what());
    }
    if (!made)
      throw Error(ErrorCode::kInvalidPlan,
                  node.label() + ": " + who + " deserializePlugin returned no plugin");
    node.plugin = std::shared_ptr<const IPlugin>(std::move(made));
  }
  if (!r.atEnd()) r.fail(std::to_string(r.remaining()) + " unexpected bytes at the end");
}

}  // namespace kiln::plan
