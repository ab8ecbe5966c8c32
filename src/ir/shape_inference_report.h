// Shape inference that reports every failing node instead of stopping at the first (kiln check).
#pragma once
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::ir {

/// Like inferShapes, but a node that fails does not stop it: its error is collected, and the nodes
/// that read its outputs (or an unsupported node's) are left uninferred. Returns the errors.
KILN_INTERNAL_API std::vector<std::string> inferShapesCollectingErrors(Graph& graph);

}  // namespace kiln::ir
