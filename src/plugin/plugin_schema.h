// The OpSchema of plugin nodes, found through the schema registry's fallback for any (domain,
// op type) that names a registered plugin (their CPU kernel:
// backends/cpu/kernels/plugin_kernel.cpp).
#pragma once
#include "ir/op_schema.h"

namespace kiln::plugin {

/// Output types and shapes from the node's plugin (getOutputDataType, getOutputDimensions).
void inferPluginNode(ir::InferContext& ctx);

}  // namespace kiln::plugin
