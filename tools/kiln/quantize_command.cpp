// kiln quantize MODEL.onnx -o OUT.onnx --calibration-data DIR|FILE.npz [--method
// entropy|minmax|percentile]
//                [--percentile P] [--per-channel] [--exclude NODE...] [--calibration-cache FILE]
//                [--verbose]
// Calibrates the float model and writes it with QuantizeLinear/DequantizeLinear pairs around its
// Conv/MatMul/Gemm: a QDQ model that ONNX Runtime runs as well as kiln (docs/precision.md, "INT8:
// calibration").
#include <iostream>
#include <set>

#include "build/calibration_runner.h"
#include "build/file_calibrator.h"
#include "build/quantization_plan.h"
#include "calibration_options.h"
#include "cli_logger.h"
#include "commands.h"
#include "ir/op_schema.h"
#include "onnx/loader.h"
#include "onnx/qdq_model.h"

namespace kiln::cli {

namespace {

struct QuantizeCommandOptions {
  std::string model;
  std::string output;
  CalibrationOptions calibration;
  bool perChannel = false;
  std::vector<std::string> exclude;
  bool verbose = false;
};

int quantizeModel(const QuantizeCommandOptions& opts) {
  CliLogger logger(opts.verbose);
  build::FileCalibrator calibrator(fileCalibratorOptions(opts.calibration));
  ir::Model model = onnx_import::loadModel(opts.model);
  ir::Graph& graph = model.graph;
  ir::inferShapes(graph);
  build::QuantizeOptions options;
  options.perChannel = opts.perChannel;
  for (const std::string& name : opts.exclude) {
    bool found = false;
    for (const ir::Node& node : graph.nodes) found = found || node.name == name;
    if (!found)
      throw Error(ErrorCode::kInvalidArgument, "--exclude: the model has no node '" + name + "'");
    options.excludeNodes.insert(name);
  }
  const build::QuantizationTargets targets = build::findQuantizationTargets(graph, options);
  if (targets.nodes.empty())
    throw Error(ErrorCode::kInvalidArgument, opts.model + ": no Conv, MatMul or Gemm to quantize");
  const auto result = build::calibrateActivations(graph, targets, build::calibrationInputs(graph),
                                                  calibrator, logger);
  const build::QuantizationPlan plan =
      build::makeQuantizationPlan(graph, targets, result.activations, options);
  onnx_import::writeQdqModel(opts.model, plan, opts.output);
  if (!calibrator.cacheWriteError().empty())
    logger.log(Severity::kWARNING, calibrator.cacheWriteError());
  if (opts.verbose) {
    for (const std::string& why : targets.skipped)
      std::cout << "int8: " << why << ", stays float32\n";
    for (const std::string& line : result.ranges) std::cout << line << "\n";
  }
  std::cout << "quantized " << opts.model << " -> " << opts.output << ": " << targets.nodes.size()
            << " layers, " << targets.activations.size() << " activations ("
            << (result.fromCache ? "scales from " + opts.calibration.cache
                                 : opts.calibration.method + " calibration")
            << "), weights " << (opts.perChannel ? "per channel" : "per tensor") << "\n";
  return 0;
}

}  // namespace

Action addQuantizeCommand(CLI::App& app) {
  auto opts = std::make_shared<QuantizeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Calibrate an ONNX model and write it as a QDQ (INT8) ONNX model");
  cmd->add_option("model", opts->model, "ONNX model file")->required();
  cmd->add_option("-o,--output", opts->output, "QDQ ONNX model to write")->required();
  addCalibrationOptions(*cmd, opts->calibration);
  cmd->add_flag("--per-channel", opts->perChannel,
                "one weight scale per output channel (default: per tensor)");
  cmd->add_option("--exclude", opts->exclude, "NODE...: nodes that stay float");
  cmd->add_flag("--verbose", opts->verbose, "print the range chosen for each tensor");
  return [opts] { return quantizeModel(*opts); };
}

}  // namespace kiln::cli
