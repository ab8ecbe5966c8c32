// Plugin nodes in kiln's IR: making a node's plugin from its fields (ONNX attributes, the simple
// path's JSON `info`, or the network API), and explaining a node whose plugin is missing.
#pragma once
#include <memory>
#include <string>

#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/plugin.h"

namespace kiln::plugin {

/// Name of the optional attribute that selects a plugin's version.
constexpr const char* kVersionAttribute = "plugin_version";

/// ONNX import fallback, for one node. A `Plugin` node (default domain) becomes a node of op
/// type `name` in domain `namespace` whose fields are its JSON `info`; a node kiln does not
/// implement keeps its (domain, op type) and its attributes are the fields. When the registry
/// has the plugin, it is created and attached (node.plugin); otherwise the node is left as it
/// is, to be reported with the other unsupported nodes. Bad fields throw naming the node.
KILN_INTERNAL_API void resolvePluginNode(ir::Node& node);

/// Checks `fields` against the creator's field list (converting int -> float and ints -> floats
/// where the list asks for floats) and creates the plugin; errors name `nodeLabel`, the field, the
/// expected and the given type. Fails if the plugin reports another identity than its creator.
KILN_INTERNAL_API std::shared_ptr<const IPlugin> createPlugin(const IPluginCreator& creator,
                                                              const std::string& nodeName,
                                                              const std::string& nodeLabel,
                                                              const PluginFields& fields);

/// The version a node asks for (its `plugin_version` attribute, int or string), "" for any.
KILN_INTERNAL_API std::string requestedVersion(const ir::Node& node);

/// For a node kiln cannot run because no plugin is registered for it: "no plugin 'X' (version
/// any, namespace 'D') is registered; plugin libraries searched: a.so" ... "" for other nodes.
KILN_INTERNAL_API std::string describeMissingPlugin(const ir::Node& node);

/// The libraries searched, for messages: "a.so, b.so" or "none loaded (...how to load one...)".
KILN_INTERNAL_API std::string searchedLibrariesText();

/// "plugin 'X' (version '1', namespace 'D')".
KILN_INTERNAL_API std::string pluginLabel(const IPlugin& plugin);

}  // namespace kiln::plugin
