// The INT8 calibration cache: a text file of each calibrated activation's scale and zero point,
// under a header naming the calibrator, the kiln version and the network's fingerprint
// (docs/precision.md, "Calibration cache").
#pragma once
#include <string>
#include <vector>

#include "build/quantization_plan.h"
#include "core/internal_api.h"
#include "kiln/calibrator.h"

namespace kiln::build {

struct CalibrationCache {
  CalibrationAlgoType algorithm = CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  std::string kilnVersion;
  std::string fingerprint;
  std::vector<ActivationQuantization> tensors;
};

KILN_INTERNAL_API std::string formatCalibrationCache(const CalibrationCache& cache);
/// Throws kiln::Error naming the line that is malformed.
KILN_INTERNAL_API CalibrationCache parseCalibrationCache(const std::string& text);

/// The cache's parameters for `tensors` (value ids of `graph`), in that order. A cache made for
/// another network is refused naming the first tensor that does not match.
KILN_INTERNAL_API std::vector<ActivationQuantization> matchCalibrationCache(
    const CalibrationCache& cache, const ir::Graph& graph, const std::vector<int>& tensors,
    const std::string& fingerprint);

}  // namespace kiln::build
