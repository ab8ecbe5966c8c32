// `kiln compare --bf16 / --int8`: an FP32 plan and a reduced-precision plan built in memory from
// the same ONNX model with the same tensors marked as outputs, run on the same inputs; and
// `--bisect`, which narrows a failing build to the fewest layers that must stay FP32.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "calibration_options.h"
#include "compare_report.h"
#include "kiln/session.h"
#include "model_runner.h"
#include "tensor_compare.h"

namespace kiln::cli {

struct PrecisionBuildOptions {
  bool bf16 = false;
  bool int8 = false;
  std::string layerPrecisions;  // NAME:TYPE,... as kiln build takes them (obeyed as a preference)
  CalibrationOptions calibration;
};

/// Adds --bf16, --int8, --layer-precisions and the calibration options.
void addPrecisionBuildOptions(CLI::App& cmd, PrecisionBuildOptions& opts);

/// Builds the model in FP32 and with the options' precision, marking `marked` (every tensor when
/// empty), and runs both on the same inputs (dynamic dims fixed to the inputs' shapes).
ComparedRuns runPrecisionBuilds(const std::string& model, const PrecisionBuildOptions& opts,
                                const std::vector<std::string>& marked, const InputOptions& in,
                                int threads);

/// Finds the fewest Conv / MatMul / Gemm layers that, kept in FP32 (--layer-precisions NAME:fp32),
/// make the reduced-precision build's model outputs (and `marked`) pass against FP32's: starting
/// from all of them, drops each in turn while the outputs still pass, so that no layer of the
/// result can go back alone (1-minimal). JSON: precision, candidates, found, fp32_layers, builds,
/// layer_precisions (the --layer-precisions that passes).
nlohmann::json bisectPrecisions(const std::string& model, const PrecisionBuildOptions& opts,
                                const std::vector<std::string>& marked, const InputOptions& in,
                                int threads, const Tolerance& tolerance);
void printBisect(std::ostream& out, const nlohmann::json& result);

}  // namespace kiln::cli
