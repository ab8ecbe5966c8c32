// kiln compare MODEL.onnx (--reference | --ref-outputs DIR | --against PLAN | --bf16 | --int8 ...)
//              [--outputs NAME,...] [--atol A] [--rtol R] [--min-snr DB] [--json] [--bisect]
//              [--input NAME=FILE.npy]... [--shapes NAME:DIMS]... [--seed N] [--threads N]
//              [--plugins LIB.so]...
// Runs two configurations of a model on the same inputs and compares every tensor both compute
// (every node output unless --outputs names some), like Polygraphy's `run --compare`: kiln as
// optimized against kiln's reference mode, outputs another engine saved, a plan, or a reduced
// precision build. Exit 0 when every tensor passes, 1 otherwise.
#include <iostream>

#include "backends/cpu/cpu_isa.h"
#include "commands.h"
#include "compare_report.h"
#include "model_runner.h"
#include "plugin_options.h"
#include "precision_builds.h"
#include "saved_outputs.h"

namespace kiln::cli {

namespace {

struct CompareOptions {
  std::string model;
  InputOptions in;
  MarkOptions marked;
  bool reference = false;
  std::string refOutputs;
  std::string against;
  PrecisionBuildOptions precision;
  bool bisect = false;
  Tolerance tolerance;
  int threads = 0;
  bool json = false;
  std::vector<std::string> plugins;
};

// The marks both sides make: the names --outputs gives, else every tensor.
SessionOptions markedSession(const CompareOptions& opts) {
  SessionOptions options;
  options.threads = opts.threads;
  options.extraOutputs = opts.marked.names;
  options.markAllOutputs = opts.marked.all || opts.marked.names.empty();
  return options;
}

void checkOneReference(const CompareOptions& opts) {
  const int sources = int{opts.reference} + int{!opts.refOutputs.empty()} +
                      int{!opts.against.empty()} + int{opts.precision.bf16 || opts.precision.int8};
  if (sources != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "give one thing to compare with: --reference, --ref-outputs DIR, --against PLAN, "
                "or --bf16 / --int8");
  }
  if (isPlanFile(opts.model)) {
    throw Error(ErrorCode::kInvalidArgument,
                opts.model +
                    " is a plan; kiln compare takes the ONNX model, and the plan "
                    "with --against");
  }
  if (opts.bisect && !(opts.precision.bf16 || opts.precision.int8)) {
    throw Error(ErrorCode::kInvalidArgument,
                "--bisect narrows a --bf16 or --int8 build; give one of them");
  }
}

// Runs the ONNX model in kiln's reference mode: no folding, fusion or layout change, each node on
// the most general kernel of its family, with AVX2 vectors at most.
NamedTensors runReference(const CompareOptions& opts, const NamedTensors& inputs) {
  cpu::ScopedCpuIsaLimit avx2(cpu::CpuIsa::kAvx2);
  SessionOptions options = markedSession(opts);
  options.optimize = false;
  options.nchwcLayout = false;
  options.referenceKernels = true;
  return openModel(opts.model, options)->run(inputs);
}

// The saved folder's inputs for those the options do not give.
void addSavedInputs(InputOptions& in, const SavedOutputs& saved) {
  for (const std::string& file : saved.inputFiles) {
    const std::string name = file.substr(0, file.find('='));
    bool given = false;
    for (const std::string& mine : in.inputs) given = given || mine.rfind(name + "=", 0) == 0;
    if (!given) in.inputs.push_back(file);
  }
}

// The plan (tested) against the ONNX model as kiln runs it, on the tensors the plan outputs.
ComparedRuns runPlanAgainstModel(const CompareOptions& opts, const InputOptions& in,
                                 const std::map<std::string, TensorOrigin>& origins) {
  auto plan = openModel(opts.against, SessionOptions{});
  NamedTensors inputs = makeInputs(*plan, in);
  SessionOptions options;
  options.threads = opts.threads;
  for (const TensorInfo& info : plan->outputs())
    if (origins.count(info.name)) options.extraOutputs.push_back(info.name);
  return {plan->run(inputs), openModel(opts.model, options)->run(inputs), "plan " + opts.against,
          "kiln, optimized, on " + opts.model};
}

// kiln as it optimizes (tested) against its reference mode or saved outputs.
ComparedRuns runModel(const CompareOptions& opts, const InputOptions& in, SavedOutputs& saved) {
  auto runner = openModel(opts.model, markedSession(opts));
  NamedTensors inputs = makeInputs(*runner, in);
  ComparedRuns runs{runner->run(inputs), {}, "kiln, optimized", ""};
  if (opts.reference) {
    runs.reference = runReference(opts, inputs);
    runs.referenceName = "kiln, reference (no fusion, NCHW, most general kernels, avx2)";
  } else {
    runs.reference = std::move(saved.outputs);
    runs.referenceName = saved.engine + " (" + opts.refOutputs + ")";
  }
  return runs;
}

int compareModel(const CompareOptions& opts) {
  checkOneReference(opts);
  loadPlugins(opts.plugins);
  const auto origins = tensorOrigins(opts.model);
  InputOptions in = opts.in;
  SavedOutputs saved;
  if (!opts.refOutputs.empty()) {
    saved = readSavedOutputs(opts.refOutputs);
    addSavedInputs(in, saved);
  }
  const ComparedRuns runs =
      !opts.against.empty() ? runPlanAgainstModel(opts, in, origins)
      : opts.precision.bf16 || opts.precision.int8
          ? runPrecisionBuilds(opts.model, opts.precision, opts.marked.names, in, opts.threads)
          : runModel(opts, in, saved);
  CompareReport report = compareRuns(runs, origins, opts.tolerance);
  report.notRead = saved.skipped;
  nlohmann::json json = reportJson(report);
  if (!opts.json) printReport(std::cout, report);
  if (opts.bisect && !report.passed()) {
    json["bisect"] = bisectPrecisions(opts.model, opts.precision, opts.marked.names, in,
                                      opts.threads, opts.tolerance);
    if (!opts.json) printBisect(std::cout, json["bisect"]);
  }
  if (opts.json) std::cout << json.dump(2) << "\n";
  return report.passed() ? 0 : 1;
}

}  // namespace

Action addCompareCommand(CLI::App& app) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd =
      app.add_subcommand("compare", "Run two configurations of a model and compare every tensor");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_flag(
      "--reference", opts->reference,
      "compare with kiln's reference mode: no fusion, NCHW, each op's most general kernel, AVX2");
  cmd->add_option("--ref-outputs", opts->refOutputs,
                  "compare with tensors saved as .npy in DIR (kiln run --output-dir, python -m "
                  "kiln.tools.dump_ort); "
                  "the inputs it lists are used");
  cmd->add_option("--against", opts->against,
                  "compare a plan built from MODEL with the ONNX model, on the plan's outputs");
  addPrecisionBuildOptions(*cmd, opts->precision);
  cmd->add_flag("--bisect", opts->bisect,
                "with --bf16/--int8, when it fails: find the fewest layers that must stay FP32 for "
                "the outputs to pass");
  cmd->add_option("--outputs", opts->marked.names,
                  "NAME,...: compare these tensors (and the model's outputs) only")
      ->delimiter(',');
  cmd->add_option("--atol", opts->tolerance.atol, "absolute tolerance (default 1e-4)");
  cmd->add_option("--rtol", opts->tolerance.rtol, "relative tolerance (default 1e-3)");
  cmd->add_option("--min-snr", opts->tolerance.minSnrDb,
                  "DB: a tensor passes when its SNR is at least DB decibels, instead of the "
                  "element tolerance (with --bisect: the fewest FP32 layers for that SNR)");
  cmd->add_flag("--json", opts->json, "print the comparison as JSON");
  cmd->add_option("--threads", opts->threads, "intra-op threads (0 = one per hardware thread)");
  addInputOptions(*cmd, opts->in);
  addPluginOption(*cmd, opts->plugins);
  return [opts] { return compareModel(*opts); };
}

}  // namespace kiln::cli
