// IPlugin's default behaviour, and the fallback through which the schema registry finds plugin
// nodes (the kernel registry's is backends/cpu/kernels/plugin_kernel.cpp).
#include "ir/op_schema.h"
#include "kiln/plugin.h"
#include "plugin/plugin_schema.h"

namespace kiln {

std::vector<DimExpr> IPlugin::getOutputDimensions(int, const std::vector<ShapeExpr>& inputs) const {
  if (inputs.empty())
    throw Error(ErrorCode::kInvalidModel, "the plugin has no inputs; override getOutputDimensions");
  return inputs[0];
}

DataType IPlugin::getOutputDataType(int, const std::vector<DataType>& inputTypes) const {
  return inputTypes.empty() ? DataType::kFloat32 : inputTypes[0];
}

bool IPlugin::supportsFormatCombination(int pos, const std::vector<PluginTensorFormat>& inOut,
                                        int) const {
  return inOut.at(static_cast<size_t>(pos)).type == DataType::kFloat32 &&
         inOut[static_cast<size_t>(pos)].format == TensorFormat::kLINEAR;
}

namespace plugin {

namespace {

// Not constant-folded (deterministic = false): a plugin runs in the engine as written, even on
// constant inputs, and its side effects (timing, logging) stay where the user put them.
const ir::OpSchema& pluginSchema() {
  static const ir::OpSchema schema{"", "<plugin>", 1, 1000, inferPluginNode, false};
  return schema;
}

struct InstallFallback {
  InstallFallback() {
    ir::OpSchemaRegistry::global().setFallback(
        [](const std::string& domain, const std::string& opType) {
          return PluginRegistry::global().hasPlugin(opType, domain) ? &pluginSchema() : nullptr;
        });
  }
};

const InstallFallback installFallback;

}  // namespace

}  // namespace plugin

}  // namespace kiln
