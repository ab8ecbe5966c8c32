// NetworkDefinition::addPlugin: a plugin layer is one node whose op type is the plugin's name and
// whose domain is its namespace, carrying the plugin (see src/plugin).
#include <functional>

#include "build/layer_transaction.h"
#include "build/network_impl.h"
#include "engine/api_guard.h"
#include "kiln/plugin.h"
#include "plugin/plugin_node.h"

namespace kiln {

namespace {

ir::Attribute attributeFromField(const PluginFieldValue& v) {
  return std::visit([](const auto& x) -> ir::Attribute { return x; }, v);
}

ILayer* addPluginLayer(NetworkDefinition::Impl& impl, const std::vector<ITensor*>& inputs,
                       const std::string& name,
                       const std::function<std::shared_ptr<const IPlugin>(
                           const std::string& nodeName, const std::string& nodeLabel)>& make,
                       const PluginFields* fields) {
  ILayer* result = nullptr;
  (void)guardStatus(&impl.logger, [&] {
    LayerTransaction tx(impl, name);
    std::vector<int> ids;
    for (ITensor* t : inputs) ids.push_back(t ? tx.input(*t) : ir::kNoValue);
    std::shared_ptr<const IPlugin> plugin =
        make(tx.name(), "layer '" + tx.name() + "' (" + name + ")");
    if (!PluginRegistry::global().getCreator(plugin->getPluginName(), plugin->getPluginVersion(),
                                             plugin->getPluginNamespace())) {
      tx.fail(plugin::pluginLabel(*plugin) +
              " has no registered creator; register one (KILN_REGISTER_PLUGIN) so " +
              "that a plan can re-create the plugin");
    }
    ir::AttributeMap attrs;
    if (fields)
      for (const auto& [field, value] : fields->all()) attrs[field] = attributeFromField(value);
    attrs[plugin::kVersionAttribute] = plugin->getPluginVersion();
    std::vector<int> outs =
        tx.node(plugin->getPluginName(), ids, std::move(attrs), plugin->getNbOutputs());
    ir::Node& node = impl.graph.nodes.back();
    node.domain = plugin->getPluginNamespace();
    node.plugin = std::move(plugin);
    result = tx.commit(outs);
  });
  return result;
}

}  // namespace

ILayer* NetworkDefinition::addPlugin(const std::vector<ITensor*>& inputs, const IPlugin& plugin) {
  return addPluginLayer(
      *impl_, inputs, plugin.getPluginName(),
      [&](const std::string&, const std::string& label) -> std::shared_ptr<const IPlugin> {
        std::unique_ptr<IPlugin> copy = plugin.clone();
        if (!copy)
          throw Error(ErrorCode::kInvalidArgument,
                      label + ": " + plugin::pluginLabel(plugin) + " clone() returned no plugin");
        return std::shared_ptr<const IPlugin>(std::move(copy));
      },
      nullptr);
}

ILayer* NetworkDefinition::addPlugin(const std::vector<ITensor*>& inputs, const std::string& name,
                                     const PluginFields& fields, const std::string& version,
                                     const std::string& pluginNamespace) {
  return addPluginLayer(
      *impl_, inputs, name,
      [&](const std::string& nodeName, const std::string& label) {
        auto creator = PluginRegistry::global().getCreator(name, version, pluginNamespace);
        if (!creator) {
          throw Error(ErrorCode::kUnsupportedNode,
                      label + ": no plugin '" + name + "' (version " +
                          (version.empty() ? "any" : "'" + version + "'") + ", namespace '" +
                          pluginNamespace + "') is registered; plugin libraries searched: " +
                          plugin::searchedLibrariesText());
        }
        return plugin::createPlugin(*creator, nodeName, label, fields);
      },
      &fields);
}

}  // namespace kiln
