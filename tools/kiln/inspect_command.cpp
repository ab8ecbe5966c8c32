// kiln inspect MODEL|PLAN [--verbose] [--graph FILE] [--graph-onnx FILE] [--shapes NAME:DIMS]...:
// what a model holds and whether kiln supports it, or what a built plan holds (I/O, profiles,
// layers and the kernels chosen; --verbose adds each layer's timed tactics); --graph draws the
// optimized network, --graph-onnx the model as imported.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>

#include "build/int8_report.h"
#include "cli_logger.h"
#include "commands.h"
#include "engine/executor.h"
#include "engine/memory_plan.h"
#include "graph_drawing.h"
#include "ir/op_schema.h"
#include "ir/shape_inference_report.h"
#include "kiln/builder.h"
#include "kiln/onnx_parser.h"
#include "onnx/loader.h"
#include "plugin_options.h"
#include "tensor_summary.h"

namespace kiln::cli {

namespace {

std::string describeValue(const ir::Value& v) {
  if (v.type.mapKeyType != DataType::kUndefined) {
    const std::string map =
        "map<" + dataTypeName(v.type.mapKeyType) + "," + dataTypeName(v.type.dtype) + ">";
    return v.name + "  " + (v.type.isSequence ? "sequence<" + map + ">" : map);
  }
  if (v.type.isSequence) return v.name + "  sequence<" + dataTypeName(v.type.dtype) + ">";
  std::string shape = v.type.shape ? ir::symShapeToString(*v.type.shape) : "?";
  return v.name + "  " + dataTypeName(v.type.dtype) + "[" + shape + "]";
}

std::string dimsText(const Shape& dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "x" : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
  return s;
}

std::string flagsText(uint32_t flags) {
  std::string s;
  if (flags & static_cast<uint32_t>(BuilderFlag::kFP16)) s += " fp16";
  if (flags & static_cast<uint32_t>(BuilderFlag::kINT8)) s += " int8";
  if (flags & static_cast<uint32_t>(BuilderFlag::kDISABLE_NCHWC_LAYOUT)) s += " no-nchwc";
  if (flags & static_cast<uint32_t>(BuilderFlag::kBF16)) s += " bf16";
  if (flags & static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS))
    s += " obey-precision-constraints";
  if (flags & static_cast<uint32_t>(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS))
    s += " prefer-precision-constraints";
  return s.empty() ? "none" : s.substr(1);
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The arena at profile 0's opt shapes beside what the intermediate tensors need without reuse.
void printArena(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MemoryPlan memory =
      planMemoryAtProfile(plan::readPlan(bytes.data(), bytes.size()), 0, OptProfileSelector::kOPT);
  std::cout << "  arena      " << std::fixed << std::setprecision(2) << mib(memory.arenaBytes)
            << " MiB at opt shapes (intermediates sum " << mib(memory.intermediateBytes) << " MiB, "
            << memory.placedTensors << " tensors)\n"
            << std::defaultfloat;
  if (memory.inPlaceConcats > 0) {
    std::cout << "  concats    " << memory.inPlaceConcats
              << " computed in place (their inputs written into the output: "
              << memory.inPlaceConcatBytes / 1024 << " KiB not copied per run)\n";
  }
  if (memory.inPlaceOutputs > 0) {
    std::cout << "  in place   " << memory.inPlaceOutputs
              << " outputs computed over an input that dies there\n";
  }
}

// Which layers run INT8 and why the others do not (a plan built from a QDQ model).
void printInt8Layers(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const plan::Plan p = plan::readPlan(bytes.data(), bytes.size());
  const std::vector<std::string> lines = build::int8LayerReport(*p.graph, p.layers);
  if (lines.empty()) return;
  std::cout << "int8\n";
  for (const std::string& line : lines) std::cout << "  " << line << "\n";
}

std::string msText(double ms) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << ms << " ms";
  return os.str();
}

// --verbose: how the layer's kernel was chosen, each candidate's time and why the others were not
// timed.
void printTactics(const LayerInfo& l) {
  if (l.tactics.empty()) {
    std::cout << "       choice  heuristics (the first candidate that supports the layer and is "
                 "preferred)\n";
    return;
  }
  int timed = 0;
  for (const TacticTiming& t : l.tactics) timed += t.milliseconds >= 0;
  std::cout << "       choice  " << l.kernelChoice << ": fastest of " << timed
            << " timed candidates\n";
  for (const TacticTiming& t : l.tactics) {
    std::cout << "       tactic  " << t.kernel << "  ";
    if (t.milliseconds >= 0) {
      std::cout << msText(t.milliseconds) << (t.kernel == l.kernel ? "  <- chosen" : "") << "\n";
    } else {
      std::cout << "not timed: " << t.note << "\n";
    }
  }
}

int inspectPlan(const std::string& path, bool verbose) {
  CliLogger logger;
  auto engine = loadPlanFile(path, logger);
  const PlanInfo& info = engine->getPlanInfo();
  std::cout << "plan " << path << "\n";
  std::cout << "  format     " << info.formatVersion << " (built by kiln " << info.kilnVersion
            << ")\n";
  std::cout << "  built from " << info.source << "\n";
  std::cout << "  cpu        " << info.cpuFeatures << "\n";
  std::cout << "  threads    " << info.threads
            << (info.threads == 0 ? " (one per hardware thread)" : "") << "\n";
  std::cout << "  workspace  "
            << (info.workspaceBytes ? std::to_string(info.workspaceBytes >> 20) + " MiB"
                                    : "no limit")
            << "\n";
  std::cout << "  flags      " << flagsText(info.builderFlags) << "\n";
  std::cout << "  opt level  " << info.builderOptimizationLevel
            << (info.builderOptimizationLevel == 0 ? " (heuristics only)" : " (tactics timed)")
            << "\n";
  std::cout << "  layers     " << info.layersBefore << " in the network, " << info.layersAfter
            << " after optimization\n";
  printArena(path);
  for (auto mode : {TensorIOMode::kINPUT, TensorIOMode::kOUTPUT}) {
    std::cout << (mode == TensorIOMode::kINPUT ? "inputs" : "outputs") << "\n";
    for (int i = 0; i < engine->getNbIOTensors(); ++i) {
      std::string name = engine->getIOTensorName(i);
      if (engine->getTensorIOMode(name) != mode) continue;
      std::cout << "  " << name << "  " << dataTypeName(engine->getTensorDataType(name)) << "["
                << dimsText(engine->getTensorShape(name)) << "]"
                << (engine->hasDefaultValue(name) ? "  (has a default)" : "") << "\n";
    }
  }
  std::cout << "profiles " << engine->getNbOptimizationProfiles() << "\n";
  for (int p = 0; p < engine->getNbOptimizationProfiles(); ++p) {
    for (int i = 0; i < engine->getNbIOTensors(); ++i) {
      std::string name = engine->getIOTensorName(i);
      if (engine->getTensorIOMode(name) != TensorIOMode::kINPUT) continue;
      std::cout << "  " << p << "  " << name << "  min "
                << dimsText(engine->getProfileShape(name, p, OptProfileSelector::kMIN)) << "  opt "
                << dimsText(engine->getProfileShape(name, p, OptProfileSelector::kOPT)) << "  max "
                << dimsText(engine->getProfileShape(name, p, OptProfileSelector::kMAX)) << "\n";
    }
  }
  std::cout << "layers " << engine->getNbLayers() << "\n";
  for (int i = 0; i < engine->getNbLayers(); ++i) {
    const LayerInfo& l = engine->getLayerInfo(i);
    std::string fused;
    for (const auto& f : l.fusedFrom) fused += (fused.empty() ? "" : ", ") + f;
    std::cout << "  " << i << "  " << l.name << " (" << l.type << ")  kernel " << l.kernel << " ("
              << l.kernelIsa << ")  precision " << l.precision << "  fused "
              << (fused.empty() ? "-" : fused) << "\n";
    if (verbose) {
      printTactics(l);
      if (!l.tactics.empty()) continue;  // the tactics list the candidates that declined
    }
    for (const std::string& declined : l.declinedKernels)
      std::cout << "       declined " << declined << "\n";
  }
  printInt8Layers(path);
  return 0;
}

int inspectModel(const std::string& path, bool verbose) {
  if (isPlanFile(path)) return inspectPlan(path, verbose);
  ir::Model model = onnx_import::loadModel(path);
  auto unsupported = findUnsupportedNodes(model.graph);
  if (unsupported.empty()) ir::inferShapes(model.graph);  // show output shapes as kiln infers them
  std::cout << "model " << path << "\n";
  std::cout << "  ir_version " << model.irVersion << "\n";
  std::cout << "  producer   " << model.producerName << (model.producerVersion.empty() ? "" : " ")
            << model.producerVersion << "\n";
  std::cout << "  opsets    ";
  for (const auto& [domain, version] : model.opsets)
    std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << ":" << version;
  std::cout << "\n";
  for (const auto& [key, value] : model.metadata)
    std::cout << "  metadata   " << key << " = " << value << "\n";
  const ir::Graph& g = model.graph;
  std::cout << "inputs\n";
  for (int id : g.inputs) {
    std::cout << "  " << describeValue(g.value(id))
              << (g.value(id).constant ? "  (has a default)" : "") << "\n";
  }
  std::cout << "outputs\n";
  for (int id : g.outputs) std::cout << "  " << describeValue(g.value(id)) << "\n";
  int total = 0;
  for (const auto& kv : model.opCounts) total += kv.second;
  std::cout << "nodes " << total << "\n";
  for (const auto& [op, count] : model.opCounts) std::cout << "  " << op << " " << count << "\n";
  std::cout << "initializers " << model.initializerCount << " (" << model.initializerBytes
            << " bytes)\n";
  if (unsupported.empty()) {
    std::cout << "all nodes are supported\n";
    return 0;
  }
  std::cout << "unsupported nodes " << unsupported.size() << "\n";
  for (const auto& line : unsupported) std::cout << "  " << line << "\n";
  return 3;
}

std::vector<char> readFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIoError, path + ": cannot open the file");
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The model built as `kiln build --builder-optimization-level 0` does (--shapes fixing dynamic
// inputs), read back as a plan: the optimized network with each layer's kernel and precision.
plan::Plan buildInMemory(const std::string& path, const std::vector<std::string>& shapes) {
  CliLogger logger;
  auto builder = createBuilder(logger);
  auto network = builder->createNetwork();
  OnnxParser parser(*network, logger);
  if (Status parsed = parser.parseFromFile(path); !parsed.ok()) throw errorFromStatus(parsed);
  BuilderConfig config;
  config.setBuilderOptimizationLevel(
      0);  // a picture of the network: the heuristics' kernels, no timing
  OptimizationProfile profile;
  for (const auto& [name, shape] : parseShapeOptions(shapes))
    for (int k = 0; k < 3; ++k)
      profile.setDimensions(name, static_cast<OptProfileSelector>(k), shape);
  if (!profile.inputNames().empty()) config.addOptimizationProfile(profile);
  auto bytes = builder->buildSerializedNetwork(*network, config);
  if (!bytes.ok()) {
    const std::string hint =
        shapes.empty() ? " (--graph builds the model: fix dynamic inputs with --shapes NAME:DIMS)"
                       : "";
    throw errorFromStatus(Status(bytes.status().code(), bytes.status().message() + hint));
  }
  return plan::readPlan(bytes->data(), bytes->size());
}

struct GraphOptions {
  std::string optimized;  // --graph
  std::string imported;   // --graph-onnx
  std::vector<std::string> shapes;
};

void drawGraphs(const std::string& path, const GraphOptions& opts) {
  const bool plan = isPlanFile(path);
  if (!opts.imported.empty()) {
    if (plan)
      throw Error(
          ErrorCode::kInvalidArgument,
          path + ": --graph-onnx needs an ONNX model; a plan holds only the optimized network");
    ir::Model model = onnx_import::loadModel(path);
    ir::inferShapesCollectingErrors(model.graph);  // shapes where kiln can infer them
    writeGraphPicture(modelGraphToDot(model.graph), opts.imported);
    std::cout << "drew " << opts.imported
              << " (the ONNX model as imported: " << model.graph.nodes.size() << " nodes)\n";
  }
  if (!opts.optimized.empty()) {
    std::vector<char> bytes;
    const plan::Plan p =
        plan ? (bytes = readFileBytes(path), plan::readPlan(bytes.data(), bytes.size()))
             : buildInMemory(path, opts.shapes);
    writeGraphPicture(planToDot(p), opts.optimized);
    std::cout << "drew " << opts.optimized << " (the optimized network: " << p.layers.size()
              << " layers)\n";
  }
}

}  // namespace

Action addInspectCommand(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's or plan's inputs, outputs, operators and support");
  auto plugins = std::make_shared<std::vector<std::string>>();
  auto graphs = std::make_shared<GraphOptions>();
  cmd->add_option("model", *model, "ONNX model file or kiln plan")->required();
  cmd->add_option("--graph", graphs->optimized,
                  "FILE.svg|.png|.dot: draw the optimized network (Graphviz)");
  cmd->add_option("--graph-onnx", graphs->imported,
                  "FILE.svg|.png|.dot: draw the ONNX model as imported");
  cmd->add_option(
      "--shapes", graphs->shapes,
      "NAME:DIMS: fixed shape of a dynamic input when --graph builds a model (repeatable)");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("--verbose,-v", *verbose,
                "for a plan: per layer, how its kernel was chosen, the candidates' times and why "
                "others declined");
  addPluginOption(*cmd, *plugins);
  return [model, plugins, graphs, verbose] {
    loadPlugins(*plugins);
    const int code = inspectModel(*model, *verbose);
    if (code == 0) drawGraphs(*model, *graphs);
    return code;
  };
}

}  // namespace kiln::cli
