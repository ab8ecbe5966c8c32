#include "build/implicit_quantization.h"

#include "build/calibration_runner.h"
#include "build/profiles.h"
#include "build/quantization_plan.h"

namespace kiln::build {

std::string quantizeImplicitly(ir::Graph& graph, const plan::Profile& profile,
                               IInt8Calibrator& calibrator, ILogger& logger, BuildReport& report) {
  const QuantizeOptions options;  // weights per output channel, nothing excluded
  const QuantizationTargets targets = findQuantizationTargets(graph, options);
  for (const std::string& why : targets.skipped)
    logger.log(Severity::kVERBOSE, "int8: " + why + ", stays float32");
  if (targets.nodes.empty()) return "int8: no layer to quantize";
  const auto inputs =
      calibrationInputs(graph, profileShapes(graph, profile, OptProfileSelector::kOPT));
  const CalibrationResult calibration =
      calibrateActivations(graph, targets, inputs, calibrator, logger);
  for (const std::string& line : calibration.ranges) {
    logger.log(Severity::kVERBOSE, line);
    report.quantizedTensors.push_back(line);
  }
  applyQuantizationPlan(makeQuantizationPlan(graph, targets, calibration.activations, options),
                        graph);
  return "int8: " + std::to_string(targets.nodes.size()) + " layers quantized, " +
         std::to_string(targets.activations.size()) + " activation scales from " +
         (calibration.fromCache
              ? "the calibration cache"
              : std::string(calibrationAlgoName(calibrator.getAlgorithm())) + " calibration");
}

}  // namespace kiln::build
