// Shape and type inference of plugin nodes: the plugin's output dim expressions, evaluated over
// the node's input shapes (symbolic at build time, concrete at run time).
#include "plugin/plugin_schema.h"

#include "plugin/plugin_node.h"

namespace kiln::plugin {

namespace {

// An expression's value as a dim: known when everything it reads is known; a dim copied from
// an input keeps that input's symbol ("batch"); anything else over unknown dims is unknown.
ir::Dim evaluateDim(const DimExpr& expr, const std::vector<Shape>& known,
                    const std::vector<const ir::SymShape*>& shapes) {
  if (auto v = expr.evaluate(known)) return ir::Dim::known(*v);
  if (expr.kind() == DimExpr::Kind::kINPUT_DIM) {
    const auto input = static_cast<size_t>(expr.value());
    const auto axis = static_cast<size_t>(expr.axis());
    if (input < shapes.size() && shapes[input] && axis < shapes[input]->size())
      return (*shapes[input])[axis];
  }
  return ir::Dim::unknown();
}

}  // namespace

void inferPluginNode(ir::InferContext& ctx) {
  const ir::Node& node = ctx.node();
  if (!node.plugin) {
    std::string missing = describeMissingPlugin(node);
    ctx.fail(missing.empty()
                 ? "the plugin node has no plugin (it was made without the plugin registry)"
                 : missing,
             ErrorCode::kUnsupportedNode);
  }
  const IPlugin& plugin = *node.plugin;
  const std::string who = pluginLabel(plugin);
  const int numOutputs = plugin.getNbOutputs();
  if (numOutputs != static_cast<int>(node.outputs.size())) {
    ctx.fail(who + " has " + std::to_string(numOutputs) + " outputs but the node lists " +
             std::to_string(node.outputs.size()));
  }
  std::vector<ShapeExpr> exprs(ctx.numInputs());
  std::vector<Shape> known(ctx.numInputs());
  std::vector<const ir::SymShape*> shapes(ctx.numInputs(), nullptr);
  std::vector<DataType> types(ctx.numInputs(), DataType::kUndefined);
  bool ranksKnown = true;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) continue;
    types[i] = ctx.inputType(i);
    shapes[i] = ctx.inputShape(i);
    if (!shapes[i]) {
      ranksKnown = false;
      continue;
    }
    for (size_t k = 0; k < shapes[i]->size(); ++k) {
      exprs[i].push_back(DimExpr::inputDim(static_cast<int>(i), static_cast<int>(k)));
      known[i].push_back((*shapes[i])[k].value);
    }
  }
  try {
    for (int k = 0; k < numOutputs; ++k) {
      const DataType type = plugin.getOutputDataType(k, types);
      if (!ranksKnown) {  // known at run time, when every shape is
        ctx.setOutputType(static_cast<size_t>(k), type);
        continue;
      }
      ir::SymShape out;
      for (const DimExpr& e : plugin.getOutputDimensions(k, exprs)) {
        ir::Dim d = evaluateDim(e, known, shapes);
        if (d.isKnown() && d.value < 0) {
          ctx.fail(who + " output " + std::to_string(k) + " has negative dim " + e.toString() +
                   " = " + std::to_string(d.value));
        }
        out.push_back(std::move(d));
      }
      ctx.setOutput(static_cast<size_t>(k), type, std::move(out));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    ctx.fail(who + ": computing the output shapes failed: " + e.what());
  }
}

}  // namespace kiln::plugin
