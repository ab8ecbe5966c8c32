// kiln check MODEL.onnx [--shapes NAME:DIMS]... [--plugins LIB.so]...: every problem of a model at
// once: ONNX's rules (onnx/model_check.h) and kiln's needs (every node supported, shape inference
// succeeding at the declared or given shapes), with a plugin skeleton for each unsupported node.
#include <iostream>
#include <optional>

#include "cli_logger.h"
#include "commands.h"
#include "engine/executor.h"
#include "ir/op_schema.h"
#include "ir/shape_inference_report.h"
#include "onnx/loader.h"
#include "onnx/model_check.h"
#include "plugin_options.h"
#include "plugin_skeleton.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

using onnx_import::ModelProblem;

// --shapes: each name must be a graph input; a shape that contradicts the declared one is a
// problem.
void applyShapes(ir::Graph& graph, const std::map<std::string, Shape>& shapes,
                 std::vector<ModelProblem>& problems) {
  for (const auto& [name, shape] : shapes) {
    const int id = graph.findValue(name);
    if (id == ir::kNoValue || !graph.isGraphInput(id)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "--shapes names '" + name + "', which is not an input of the model");
    }
    ir::TypeInfo& type = graph.value(id).type;
    if (type.shape) {
      const ir::SymShape& declared = *type.shape;
      bool fits = declared.size() == shape.size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = !declared[d].isKnown() || declared[d].value == shape[d];
      if (!fits) {
        problems.push_back({"shapes", "--shapes " + name + ":" + shapeToString(shape) +
                                          " does not fit input '" + name + "' declared as " +
                                          ir::symShapeToString(declared)});
        continue;
      }
    }
    type.shape = ir::symShapeOf(shape);
  }
}

// The skeletons of the nodes (at any depth) that kiln has no operator for.
void collectSkeletons(const ir::Graph& graph, std::vector<std::string>& out) {
  for (const ir::Node& node : graph.nodes) {
    if (!ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset)) {
      out.push_back(cppPluginSkeleton(graph, node) + "\n" + pythonPluginSkeleton(graph, node));
    }
    for (const auto& [name, attr] : node.attrs) {
      if (const auto* g = std::get_if<std::shared_ptr<ir::Graph>>(&attr))
        collectSkeletons(**g, out);
      if (const auto* gs = std::get_if<std::vector<std::shared_ptr<ir::Graph>>>(&attr))
        for (const auto& g : *gs) collectSkeletons(*g, out);
    }
  }
}

// kiln's own checks on the loaded model; returns the skeletons for unsupported nodes.
std::vector<std::string> checkKilnSupport(ir::Model& model,
                                          const std::map<std::string, Shape>& shapes,
                                          std::vector<ModelProblem>& problems) {
  applyShapes(model.graph, shapes, problems);
  for (const std::string& line : findUnsupportedNodes(model.graph))
    problems.push_back({"kiln-support", line});
  for (const std::string& error : ir::inferShapesCollectingErrors(model.graph))
    problems.push_back({"shape-inference", error});
  std::vector<std::string> skeletons;
  collectSkeletons(model.graph, skeletons);
  return skeletons;
}

int checkModel(const std::string& path, const std::vector<std::string>& shapeOptions) {
  const auto shapes = parseShapeOptions(shapeOptions);
  std::vector<ModelProblem> problems = onnx_import::checkModelFile(path);
  std::optional<ir::Model> model;
  std::string loadError;
  try {
    CliLogger warnings;  // unused initializers: not a problem, but worth a line on stderr
    model = onnx_import::loadModel(path, nullptr, &warnings);
  } catch (const Error& e) {
    loadError = e.what();
    if (problems.empty()) problems.push_back({"load", loadError});
  }
  std::vector<std::string> skeletons;
  if (model) skeletons = checkKilnSupport(*model, shapes, problems);
  if (problems.empty()) {
    std::cout << path << ": no problems found\n";
    return 0;
  }
  std::cout << path << ": " << problems.size() << " problem" << (problems.size() > 1 ? "s" : "")
            << "\n";
  bool onlyUnsupported = true;
  for (const ModelProblem& p : problems) {
    std::cout << "  [" << p.rule << "] " << printable(p.message) << "\n";
    onlyUnsupported = onlyUnsupported && p.rule == "kiln-support";
  }
  if (!model) {
    std::cout << "kiln's own checks (supported operators, shape inference) did not run: "
              << printable(loadError) << "\n";
  }
  for (const std::string& skeleton : skeletons) {
    std::cout << "\nplugin skeleton:\n" << skeleton;
  }
  return onlyUnsupported ? 3 : 1;
}

}  // namespace

Action addCheckCommand(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto shapes = std::make_shared<std::vector<std::string>>();
  auto plugins = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Validate a model against ONNX's rules and kiln's needs, listing every problem");
  cmd->add_option("model", *model, "ONNX model file")->required();
  cmd->add_option("--shapes", *shapes,
                  "NAME:1x3x224x224: shape of a dynamic input for shape inference (repeatable)");
  addPluginOption(*cmd, *plugins);
  return [model, shapes, plugins] {
    loadPlugins(*plugins);
    return checkModel(*model, *shapes);
  };
}

}  // namespace kiln::cli
