// BuilderFlag::kINT8 with a calibrator (TensorRT's implicit quantization): the float graph's
// Conv/MatMul/Gemm get Q/DQ pairs whose activation scales come from calibration, so that the
// QDQ fusion makes them integer layers (docs/precision.md, "INT8: calibration").
#pragma once
#include <string>

#include "engine/plan_format.h"
#include "ir/graph.h"
#include "kiln/builder.h"

namespace kiln::build {

/// Calibrates at `profile`'s opt shapes and inserts the Q/DQ pairs; the ranges chosen go to
/// report.quantizedTensors and the log (verbose). Returns a summary for the optimize stage.
std::string quantizeImplicitly(ir::Graph& graph, const plan::Profile& profile,
                               IInt8Calibrator& calibrator, ILogger& logger, BuildReport& report);

}  // namespace kiln::build
