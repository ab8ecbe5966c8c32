// The plugin that would implement a node kiln cannot run, as source to start from: a C++ simple
// plugin (include/kiln/plugin.h, docs/plugins.md) and a Python custom op (kiln.custom_op), with
// the node's op type, domain, inputs, outputs and attributes filled in. kiln check prints them.
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln::cli {

/// C++ source of a SimplePlugin for the node, or for a node of several outputs of an IPlugin
/// with its fields as state and its creator (docs/plugins.md, "The full path").
std::string cppPluginSkeleton(const ir::Graph& graph, const ir::Node& node);
/// Python source of a kiln.custom_op for the node.
std::string pythonPluginSkeleton(const ir::Graph& graph, const ir::Node& node);

}  // namespace kiln::cli
