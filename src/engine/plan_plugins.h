// The plugins section of a plan: for each plugin node (in the main graph or a control-flow
// body), the plugin's name, version, namespace and serialized bytes; re-created through the
// plugin registry when the plan loads.
#pragma once
#include "core/internal_api.h"
#include "engine/plan_bytes.h"
#include "ir/graph.h"

namespace kiln::plan {

/// True when some node (at any depth) carries a plugin.
bool hasPluginNodes(const ir::Graph& graph);
void writePlugins(ByteWriter& w, const ir::Graph& graph);
/// Attaches the re-created plugins to their nodes. A plugin that is not registered is an error
/// (kUnsupportedNode) naming it, its node, and the plugin libraries searched.
KILN_INTERNAL_API void readPlugins(ByteReader r, ir::Graph& graph);

}  // namespace kiln::plan
