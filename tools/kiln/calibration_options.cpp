#include "calibration_options.h"

#include <filesystem>

#include "kiln/error.h"

namespace kiln::cli {

void addCalibrationOptions(CLI::App& cmd, CalibrationOptions& opts) {
  cmd.add_option("--calibration-data", opts.data,
                 "DIR (one subfolder per sample of <input>.npy) or FILE.npz (samples stacked on a "
                 "new first axis)");
  cmd.add_option(
      "--calib,--calibration-cache", opts.cache,
      "calibration cache: read when it exists (the data is then not needed), else written");
  cmd.add_option("--method,--calibration-method", opts.method,
                 "calibrator: entropy (default), minmax or percentile")
      ->check(CLI::IsMember({"entropy", "minmax", "percentile"}));
  cmd.add_option("--percentile", opts.percentile,
                 "percentile of |x| kept by --method percentile (default 99.99)")
      ->check(CLI::Range(0.0, 100.0));
}

build::FileCalibratorOptions fileCalibratorOptions(const CalibrationOptions& opts) {
  build::FileCalibratorOptions out;
  out.data = opts.data;
  out.cacheFile = opts.cache;
  out.algorithm = opts.method == "minmax"       ? CalibrationAlgoType::kMINMAX_CALIBRATION
                  : opts.method == "percentile" ? CalibrationAlgoType::kPERCENTILE_CALIBRATION
                                                : CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  out.percentile = opts.percentile;
  if (opts.data.empty() && (opts.cache.empty() || !std::filesystem::exists(opts.cache))) {
    throw Error(ErrorCode::kInvalidArgument,
                opts.cache.empty()
                    ? "INT8 calibration needs --calibration-data DIR|FILE.npz or a calibration "
                      "cache (--calib FILE)"
                    : opts.cache +
                          ": no such calibration cache, and no --calibration-data to make it from");
  }
  return out;
}

}  // namespace kiln::cli
