// Builder::buildSerializedNetwork: optimize -> select kernels -> plan memory -> serialize.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <set>
#include <sstream>
#include <thread>

#include "build/compile.h"
#include "build/implicit_quantization.h"
#include "build/int8_report.h"
#include "build/network_impl.h"
#include "build/precision.h"
#include "build/profiles.h"
#include "build/tactics.h"
#include "core/tensor_limits.h"
#include "engine/api_guard.h"
#include "engine/executor.h"
#include "engine/plan_format.h"
#include "ir/op_schema.h"
#include "ir/precision.h"
#include "kiln/plugin.h"
#include "opt/passes.h"

namespace kiln {

namespace {

std::string mib(uint64_t bytes) {
  std::ostringstream os;
  os.precision(bytes < (10u << 20) ? 2 : 1);
  os << std::fixed << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

class StageTimer {
 public:
  StageTimer(BuildReport& report, ILogger& logger) : report_(report), logger_(logger) {}
  template <typename Fn>
  void run(const std::string& name, Fn&& fn) {
    auto start = std::chrono::steady_clock::now();
    std::string summary = fn();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    report_.stages.push_back({name, ms, summary});
    std::ostringstream os;
    os << name << ": " << summary << " (" << std::fixed << std::setprecision(1) << ms << " ms)";
    logger_.log(Severity::kINFO, os.str());
  }

 private:
  BuildReport& report_;
  ILogger& logger_;
};

// Inserts a Cast after each layer output whose requested type differs from the computed one;
// the Cast's output takes over the tensor's name and its consumers.
void applyOutputTypes(const std::vector<LayerRecord>& layers, ir::Graph& g) {
  for (const LayerRecord& layer : layers) {
    for (size_t k = 0; k < layer.outputs.size(); ++k) {
      const DataType want = layer.outputTypes[k];
      const int id = layer.outputs[k];
      if (want == DataType::kUndefined || want == g.value(id).type.dtype) continue;
      const std::string name = g.value(id).name;
      g.valueIds.erase(name);
      g.value(id).name = name + "_before_cast";
      g.valueIds.emplace(g.value(id).name, id);
      const int cast = g.addValue(name, ir::TypeInfo{want, g.value(id).type.shape});
      for (ir::Node& node : g.nodes)
        for (int& in : node.inputs)
          if (in == id) in = cast;
      for (int& out : g.outputs)
        if (out == id) out = cast;
      ir::Node node;
      node.name = layer.name + "_cast";
      node.opType = "Cast";
      node.opset = kNetworkOpset;
      node.inputs = {id};
      node.outputs = {cast};
      node.attrs["to"] = static_cast<int64_t>(want);
      g.nodes.push_back(std::move(node));
    }
  }
}

[[noreturn]] void throwUnsupportedNodes(const std::vector<std::string>& problems) {
  std::string message = std::to_string(problems.size()) + " unsupported node" +
                        (problems.size() > 1 ? "s" : "") + ": ";
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  throw Error(ErrorCode::kUnsupportedNode, message);
}

// Concrete shape inference at one selector of one profile: proves every layer accepts those
// shapes, and plans the arena of the activations and the kernels' workspaces.
// Fails naming the first tensor of `g` (shapes inferred) that could never be allocated: more bytes
// than the allocation limit (BuilderConfig::setAllocationLimit, by default 90 % of this machine's
// memory), or a size past 2^64. `where` says at which shapes.
void checkTensorsFitInMemory(const ir::Graph& g, const std::string& where) {
  const uint64_t limit = allocationLimitBytes();
  for (size_t id = 0; id < g.values.size(); ++id) {
    const ir::Value& v = g.values[id];
    if (v.constant || !v.type.shape || v.type.dtype == DataType::kString ||
        v.type.dtype == DataType::kUndefined)
      continue;
    const auto shape = ir::concreteShape(*v.type.shape);
    if (!shape) continue;
    uint64_t bytes = dataTypeSize(v.type.dtype);
    bool overflow = false;
    for (int64_t d : *shape)
      overflow =
          overflow || d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
    if (!overflow && bytes <= limit) continue;
    std::string owner = "input '" + v.name + "'";
    if (v.producer >= 0) {
      const ir::Node& node = g.nodes[static_cast<size_t>(v.producer)];
      const auto k = std::find(node.outputs.begin(), node.outputs.end(), static_cast<int>(id)) -
                     node.outputs.begin();
      owner = node.label() + ": output " + std::to_string(k) + " '" + v.name + "'";
    }
    throw Error(ErrorCode::kInvalidArgument,
                where + ": " + owner + " " + dataTypeName(v.type.dtype) + "[" +
                    shapeToString(*shape) + "] needs " +
                    (overflow ? std::string("more than 2^64 bytes") : byteCountText(bytes)) + ", " +
                    allocationLimitText());
  }
}

MemoryPlan checkProfileShapes(const ir::Graph& graph, const plan::Profile& profile, int index,
                              OptProfileSelector which, const KernelMemoryNeeds& kernels) {
  static const char* names[] = {"min", "opt", "max"};
  ir::Graph g = graph;
  std::string given;
  for (const auto& [id, shape] : build::profileShapes(graph, profile, which)) {
    if (g.value(id).constant) continue;  // an input with a default keeps it for the check
    g.value(id).type.shape = ir::symShapeOf(shape);
    given += (given.empty() ? "" : ", ") + g.value(id).name + ":" + shapeToString(shape);
  }
  for (ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) g.value(id).type = ir::TypeInfo{};
  try {
    ir::inferShapes(g);
  } catch (const Error& e) {
    throw Error(e.code(), "optimization profile " + std::to_string(index) + " " +
                              names[static_cast<int>(which)] + " shapes (" + given +
                              "): " + e.what());
  }
  checkTensorsFitInMemory(g, "optimization profile " + std::to_string(index) + " " +
                                 names[static_cast<int>(which)] + " shapes (" + given + ")");
  return planMemory(g, &kernels);
}

// What the layer records of its kernel: the chosen id, its ISA and the earlier candidates' reasons.
void describeKernel(const KernelChoice& choice, LayerInfo& info) {
  info.kernel = choice.id;
  info.kernelIsa = cpu::isaFeatureName(choice.isa);
  for (const auto& [id, reason] : choice.declined)
    info.declinedKernels.push_back(id + ": " + reason);
}

// A timed layer's record: how its kernel was chosen, every candidate's time, and the reasons of
// those that were not timed.
void describeTactics(const build::LayerTactics& tactics, LayerInfo& info) {
  info.kernelChoice = tactics.source;
  info.tactics = tactics.timings;
  info.declinedKernels.clear();
  for (const TacticTiming& t : tactics.timings)
    if (t.milliseconds < 0) info.declinedKernels.push_back(t.kernel + ": " + t.note);
}

// The pool the context will most likely run on: the configured threads, else one per hardware
// thread.
int plannedThreads(const BuilderConfig& config) {
  if (config.getThreads() > 0) return config.getThreads();
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The graph as the plan stores it: a constant that every reader's kernel keeps packed, in a
// state the plan holds and the kernel is restored from, is left out (only its dtype and shape).
std::shared_ptr<ir::Graph> graphForPlan(const ir::Graph& graph, const Executor& kernels) {
  auto g = std::make_shared<ir::Graph>(graph);
  for (int id : kernels.constantsWithOwnCopies()) {
    bool restorable = true;
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      const auto& in = g->nodes[i].inputs;
      if (std::find(in.begin(), in.end(), id) != in.end())
        restorable = restorable && kernels.restorable(i);
    }
    Tensor& value = *g->value(id).constant;
    if (restorable) value = Tensor::wrap(value.dtype(), value.shape(), nullptr, nullptr);
  }
  return g;
}

std::set<std::string> nodeNames(const ir::Graph& g) {
  std::set<std::string> names;
  for (const ir::Node& node : g.nodes) names.insert(node.name);
  return names;
}

std::string describeValue(const ir::Value& v) {
  return v.name + " " + dataTypeName(v.type.dtype) + "[" +
         (v.type.shape ? ir::symShapeToString(*v.type.shape) : "?") + "]";
}

// The plan's I/O list: inputs (dims -1 where dynamic) then outputs, in the graph's order.
std::vector<plan::IOTensor> ioTensors(const ir::Graph& g,
                                      const std::vector<plan::Profile>& profiles) {
  std::vector<plan::IOTensor> io;
  for (int id : g.inputs) {
    const ir::Value& v = g.value(id);
    const bool hasShape = v.type.shape && !v.type.isSequence;
    plan::IOTensor t{v.name,
                     TensorIOMode::kINPUT,
                     v.type.dtype,
                     hasShape || !profiles.empty(),
                     {},
                     v.constant.has_value(),
                     id};
    // With profiles every input has a rank (resolveProfiles); without, the declared one if any.
    const size_t rank = !profiles.empty() ? profiles[0].find(v.name)->dims[0].size()
                        : hasShape        ? v.type.shape->size()
                                          : 0;
    for (size_t i = 0; i < rank; ++i) {
      bool fixed = v.type.shape && (*v.type.shape)[i].isKnown();
      t.dims.push_back(fixed ? (*v.type.shape)[i].value : -1);
    }
    io.push_back(std::move(t));
  }
  for (int id : g.outputs) {
    const ir::Value& v = g.value(id);
    const bool hasShape = v.type.shape && !v.type.isSequence;
    plan::IOTensor t{v.name, TensorIOMode::kOUTPUT, v.type.dtype, hasShape, {}, false, id};
    if (hasShape)
      for (const ir::Dim& d : *v.type.shape) t.dims.push_back(d.isKnown() ? d.value : -1);
    io.push_back(std::move(t));
  }
  return io;
}

}  // namespace

namespace build {

CompiledNetwork compileNetwork(ir::Graph graphIn, const std::vector<LayerRecord>& networkLayers,
                               const std::string& source, const BuilderConfig& config,
                               const CompileOptions& options, ILogger& logger,
                               BuildReport& report) {
  StageTimer timer(report, logger);
  auto graph = std::make_shared<ir::Graph>(std::move(graphIn));
  std::vector<plan::Profile> profiles;
  build::PrecisionRequest request;

  timer.run("optimize", [&] {
    ir::Graph& g = *graph;
    if (config.getThreads() < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "threads must be >= 0 (0 = one per hardware thread)");
    if (config.getBuilderOptimizationLevel() < 0 || config.getBuilderOptimizationLevel() > 5) {
      throw Error(ErrorCode::kInvalidArgument,
                  "builder optimization level " +
                      std::to_string(config.getBuilderOptimizationLevel()) + " is not in 0..5");
    }
    request = build::precisionRequest(networkLayers, g, config, logger);
    applyOutputTypes(networkLayers, g);
    auto unsupported = findUnsupportedNodes(g);
    if (!unsupported.empty()) throwUnsupportedNodes(unsupported);
    ir::sortTopologically(g);
    ir::verifyGraph(g);
    ir::inferShapes(g);
    if (!options.unboundedShapes) profiles = build::resolveProfiles(g, config);
    report.layersBefore = static_cast<int>(g.nodes.size());
    std::vector<ir::Node> before = g.nodes;
    const int widened = options.optimize ? opt::widenFloat16Interior(g) : 0;
    std::set<std::string> afterWidening = nodeNames(g);
    const int folded = options.optimize ? opt::foldConstants(g) : 0;
    std::set<std::string> afterFolding = nodeNames(g);
    const int removed = options.optimize ? opt::eliminateDeadNodes(g) : 0;
    std::set<std::string> afterRemoval = nodeNames(g);
    std::string int8;
    if (config.getFlag(BuilderFlag::kINT8) && config.getInt8Calibrator()) {
      if (profiles.empty())
        throw Error(ErrorCode::kInvalidArgument, "INT8 calibration needs an optimization profile");
      // Folded first so that the Conv is quantized with the BatchNorm's scale in its weights.
      opt::foldBatchNormIntoConv(g);
      build::pinFloatLayers(g, request);
      int8 = ", " +
             build::quantizeImplicitly(g, profiles[0], *config.getInt8Calibrator(), logger, report);
    }
    const int fused =
        options.optimize
            ? opt::fuseLayers(
                  g, opt::FusionOptions{!config.getFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT)})
            : 0;
    std::map<std::string, std::string> fusedInto = opt::fusedNodeNames(g);
    const std::vector<std::string> precisions = build::markPrecisions(g, request, logger);
    for (const ir::Node& node : before) {
      if (!afterWidening.count(node.name)) {
        report.layerDecisions.push_back(node.label() +
                                        ": removed, an identity once float16 runs in float32");
      } else if (!afterFolding.count(node.name)) {
        report.layerDecisions.push_back(node.label() + ": folded into a constant");
      } else if (!afterRemoval.count(node.name)) {
        report.layerDecisions.push_back(node.label() + ": removed, nothing reads its outputs");
      } else if (fusedInto.count(node.name)) {
        report.layerDecisions.push_back(node.label() + ": fused into layer '" +
                                        fusedInto[node.name] + "'");
      }
    }
    for (const std::string& line : report.layerDecisions) logger.log(Severity::kVERBOSE, line);
    report.layerDecisions.insert(report.layerDecisions.end(), precisions.begin(), precisions.end());
    report.layersAfter = static_cast<int>(g.nodes.size());
    return std::to_string(report.layersBefore) + " layers -> " +
           std::to_string(report.layersAfter) + " (" + std::to_string(folded) +
           " folded into constants, " + std::to_string(removed) + " unused removed, " +
           std::to_string(fused) + " fused" +
           (widened ? ", " + std::to_string(widened) + " float16<->float32 Casts removed" : "") +
           ")" + int8;
  });

  std::vector<LayerInfo> layers;
  std::unique_ptr<Executor> kernels;
  timer.run("select kernels", [&] {
    // BF16 is timed at the opt shapes; without a profile the heuristics' marks stand.
    if (!profiles.empty()) {
      for (std::string& line :
           build::timePrecisions(*graph, profiles[0], plannedThreads(config), request, logger))
        report.layerDecisions.push_back(std::move(line));
    }
    // Tactics: the fastest candidate of each timed layer (none at level 0, or without a profile).
    std::vector<build::LayerTactics> tactics(graph->nodes.size());
    if (!profiles.empty() && options.kernelPolicy == Executor::KernelPolicy::kFirstSupporting) {
      const build::TacticOptions to{config.getBuilderOptimizationLevel(), plannedThreads(config),
                                    config.getTimingCache()};
      tactics = build::selectTactics(*graph, profiles[0], to, logger, report);
    }
    std::vector<std::string> ids;
    for (const build::LayerTactics& t : tactics) ids.push_back(t.kernel);
    if (std::all_of(ids.begin(), ids.end(), [](const std::string& id) { return id.empty(); }))
      ids.clear();
    // Makes every kernel, the tactic's or the candidate of its family the policy picks:
    // factories validate attributes and pre-pack weights.
    kernels = options.freeCopiedWeights
                  ? std::make_unique<Executor>(graph, Executor::kFreeCopiedWeights, ids, nullptr,
                                               options.kernelPolicy)
                  : std::make_unique<Executor>(graph, ids, options.kernelPolicy);
    for (std::string& line :
         build::settlePrecisions(*graph, kernels->kernelChoices(), request, logger))
      report.layerDecisions.push_back(std::move(line));
    const ir::Graph& g = *graph;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& node = g.nodes[i];
      LayerInfo info{node.name, node.opType,          {}, {},           {}, {},
                     {},        opt::fusedFrom(node), {}, "heuristics", {}};
      describeKernel(kernels->kernelChoices()[i], info);
      if (!tactics[i].kernel.empty()) describeTactics(tactics[i], info);
      info.precision = ir::layerPrecision(g, node);
      std::string outs;
      for (int id : node.outputs) {
        info.outputs.push_back(id == ir::kNoValue ? "" : g.value(id).name);
        if (id != ir::kNoValue) outs += (outs.empty() ? "" : ", ") + describeValue(g.value(id));
      }
      for (int id : node.inputs) info.inputs.push_back(id == ir::kNoValue ? "" : g.value(id).name);
      std::string decision =
          "layer '" + node.name + "' (" + node.opType + "): kernel " + info.kernel + " -> " + outs;
      if (!ir::nodePrecision(node).empty()) decision += ", precision " + info.precision;
      for (const std::string& declined : info.declinedKernels)
        decision += "\n    declined " + declined;
      logger.log(Severity::kVERBOSE, decision);
      report.layerDecisions.push_back(std::move(decision));
      layers.push_back(std::move(info));
    }
    for (std::string& line : build::int8LayerReport(g, layers)) {
      logger.log(Severity::kVERBOSE, line);
      report.layerDecisions.push_back(std::move(line));
    }
    std::string summary = std::to_string(layers.size()) + " kernels";
    if (config.getBuilderOptimizationLevel() > 0 && !profiles.empty()) {
      summary += ", tactics at optimization level " +
                 std::to_string(config.getBuilderOptimizationLevel()) + ": " +
                 std::to_string(report.tacticLayersTimed) + " layers timed (" +
                 std::to_string(report.tacticRuns) + " runs), " +
                 std::to_string(report.tacticLayersFromCache) + " from the timing cache";
    }
    return summary;
  });

  if (!profiles.empty())
    timer.run("plan memory", [&] {
      const KernelMemoryNeeds needs = kernels->memoryNeeds(plannedThreads(config));
      uint64_t maxWorkspace = 0;  // the largest kernel workspace at the max shapes
      for (size_t p = 0; p < profiles.size(); ++p) {
        for (auto which :
             {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX}) {
          MemoryPlan memory =
              checkProfileShapes(*graph, profiles[p], static_cast<int>(p), which, needs);
          const uint64_t bytes = memory.arenaBytes;
          if (which == OptProfileSelector::kMAX)
            maxWorkspace = std::max(maxWorkspace, memory.largestWorkspace);
          if (p == 0 && which == OptProfileSelector::kOPT) {
            report.arenaBytes = bytes;
            report.intermediateBytes = memory.intermediateBytes;
          }
          if (which == OptProfileSelector::kMAX)
            report.maxArenaBytes = std::max(report.maxArenaBytes, bytes);
        }
      }
      const uint64_t limit = config.getMemoryPoolLimit();
      if (limit && report.maxArenaBytes > limit) {
        throw Error(ErrorCode::kInvalidArgument,
                    "the activations and kernel workspaces need " + mib(report.maxArenaBytes) +
                        " (" + std::to_string(report.maxArenaBytes) +
                        " bytes, the largest workspace " + std::to_string(maxWorkspace) +
                        " bytes) at the profiles' max shapes, more than the workspace limit of " +
                        mib(limit) + " (" + std::to_string(limit) + " bytes)");
      }
      return "arena " + mib(report.arenaBytes) + " at opt shapes (intermediates sum " +
             mib(report.intermediateBytes) + "), " + mib(report.maxArenaBytes) + " at max shapes";
    });

  CompiledNetwork compiled;
  plan::Plan& p = compiled.plan;
  p.info.formatVersion = plan::kFormatVersion;
  p.info.kilnVersion = plan::kKilnVersion;
  p.info.threads = config.getThreads();
  p.info.workspaceBytes = config.getMemoryPoolLimit();
  p.info.builderFlags = config.getFlags();
  p.info.builderOptimizationLevel = config.getBuilderOptimizationLevel();
  p.info.layersBefore = report.layersBefore;
  p.info.layersAfter = report.layersAfter;
  p.info.arenaBytes = report.arenaBytes;
  p.info.source = source;
  p.io = ioTensors(*graph, profiles);
  p.profiles = std::move(profiles);
  p.graph = std::move(graph);
  p.layers = std::move(layers);
  compiled.kernels = std::move(kernels);
  return compiled;
}

}  // namespace build

namespace {

std::vector<uint8_t> buildPlan(const NetworkDefinition::Impl& net, const BuilderConfig& config,
                               ILogger& logger, BuildReport& report) {
  if (net.graph.outputs.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "the network has no outputs; mark one with markOutput");
  build::CompiledNetwork compiled =
      build::compileNetwork(net.graph, net.layers, net.source, config, {}, logger, report);
  std::vector<uint8_t> bytes;
  StageTimer(report, logger).run("serialize", [&] {
    plan::Plan& p = compiled.plan;
    p.graph = graphForPlan(*p.graph, *compiled.kernels);
    p.kernelStates = compiled.kernels->kernelStates();
    bytes = plan::writePlan(p);
    report.planBytes = bytes.size();
    return "plan " + mib(bytes.size());
  });
  return bytes;
}

}  // namespace

Result<std::vector<uint8_t>> Builder::buildSerializedNetwork(const NetworkDefinition& network,
                                                             const BuilderConfig& config,
                                                             BuildReport* report) {
  BuildReport local;
  BuildReport& r = report ? *report : local;
  r = BuildReport{};
  return guardResult<std::vector<uint8_t>>(&logger_, [&] {
    AllocationLimitScope limit(config.getAllocationLimit());
    return buildPlan(network.impl(), config, logger_, r);
  });
}

}  // namespace kiln
