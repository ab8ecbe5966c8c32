// The OpSchema and the CPU kernel of plugin nodes, found through the fallbacks of the schema
// and kernel registries for any (domain, op type) that names a registered plugin.
#pragma once
#include "backends/cpu/kernel.h"
#include "ir/op_schema.h"

namespace kiln::plugin {

/// Output types and shapes from the node's plugin (getOutputDataType, getOutputDimensions).
void inferPluginNode(ir::InferContext& ctx);

/// Checks the plugin's supported formats for the node's types and returns a kernel that runs the
/// plugin: each concurrent run takes its own clone (configure on new shapes, workspace, enqueue).
cpu::KernelFn makePluginKernel(const cpu::KernelCreateInfo& info);

}  // namespace kiln::plugin
