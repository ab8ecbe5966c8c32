// kiln inspect MODEL: what a model holds and whether kiln supports it.
#include <iostream>

#include "commands.h"
#include "engine/executor.h"
#include "ir/op_schema.h"
#include "onnx/loader.h"

namespace kiln::cli {

namespace {

std::string describeValue(const ir::Value& v) {
  std::string shape = v.type.shape ? ir::symShapeToString(*v.type.shape) : "?";
  return v.name + "  " + dataTypeName(v.type.dtype) + "[" + shape + "]";
}

int inspectModel(const std::string& path) {
  ir::Model model = onnx_import::loadModel(path);
  std::cout << "model " << path << "\n";
  std::cout << "  ir_version " << model.irVersion << "\n";
  std::cout << "  producer   " << model.producerName << (model.producerVersion.empty() ? "" : " ")
            << model.producerVersion << "\n";
  std::cout << "  opsets    ";
  for (const auto& [domain, version] : model.opsets) std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << ":" << version;
  std::cout << "\n";
  for (const auto& [key, value] : model.metadata) std::cout << "  metadata   " << key << " = " << value << "\n";
  const ir::Graph& g = model.graph;
  std::cout << "inputs\n";
  for (int id : g.inputs) {
    std::cout << "  " << describeValue(g.value(id)) << (g.value(id).constant ? "  (has a default)" : "") << "\n";
  }
  std::cout << "outputs\n";
  for (int id : g.outputs) std::cout << "  " << describeValue(g.value(id)) << "\n";
  int total = 0;
  for (const auto& kv : model.opCounts) total += kv.second;
  std::cout << "nodes " << total << "\n";
  for (const auto& [op, count] : model.opCounts) std::cout << "  " << op << " " << count << "\n";
  std::cout << "initializers " << model.initializerCount << " (" << model.initializerBytes << " bytes)\n";
  auto unsupported = findUnsupportedNodes(g);
  if (unsupported.empty()) {
    std::cout << "all nodes are supported\n";
    return 0;
  }
  std::cout << "unsupported nodes " << unsupported.size() << "\n";
  for (const auto& line : unsupported) std::cout << "  " << line << "\n";
  return 3;
}

}  // namespace

Action addInspectCommand(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model's inputs, outputs, operators and support");
  cmd->add_option("model", *model, "ONNX model file")->required();
  return [model] { return inspectModel(*model); };
}

}  // namespace kiln::cli
