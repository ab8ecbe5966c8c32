// Runs the float network on a calibrator's batches (through the engine's Executor) and turns what
// every observed tensor held into int8 parameters; or takes them from the calibrator's cache.
#pragma once
#include <string>
#include <vector>

#include "build/quantization_plan.h"
#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/calibrator.h"
#include "kiln/logger.h"

namespace kiln::build {

/// The graph inputs a calibrator feeds (constants excluded), with the shapes a batch must have:
/// `shapes` where given (a profile's opt shapes), else the graph's dims (-1 where unknown).
KILN_INTERNAL_API std::vector<CalibrationInput> calibrationInputs(
    const ir::Graph& graph, const std::map<int, Shape>& shapes = {});

struct CalibrationResult {
  std::vector<ActivationQuantization> activations;  // one per target activation, in order
  std::vector<std::string> ranges;  // one line per activation: range, scale, zero point, calibrator
  bool fromCache = false;
};

/// The activations' parameters: from the calibrator's cache when it returns one (refused if made
/// for another network), else from its batches (the cache is then written back).
/// Throws kiln::Error naming the input when a batch is missing, has the wrong shape or holds NaN.
KILN_INTERNAL_API CalibrationResult calibrateActivations(
    const ir::Graph& graph, const QuantizationTargets& targets,
    const std::vector<CalibrationInput>& inputs, IInt8Calibrator& calibrator, ILogger& logger);

}  // namespace kiln::build
