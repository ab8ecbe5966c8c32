// The calibration options that kiln build (--int8) and kiln quantize share.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "build/file_calibrator.h"

namespace kiln::cli {

struct CalibrationOptions {
  std::string data;   // --calibration-data: folder or .npz
  std::string cache;  // --calib / --calibration-cache
  std::string method = "entropy";
  double percentile = 99.99;
};

void addCalibrationOptions(CLI::App& cmd, CalibrationOptions& opts);

/// The file calibrator for the options; throws when neither data nor an existing cache is given.
build::FileCalibratorOptions fileCalibratorOptions(const CalibrationOptions& opts);

}  // namespace kiln::cli
