// A calibrator over files (kiln build --calibration-data, kiln quantize): a folder with one
// subfolder per sample, each holding <input name>.npy, or an .npz whose arrays, named after the
// inputs, stack the samples along a new first axis. One sample a batch. A sample one rank short
// of its input gets a leading batch dimension of 1. The cache is read from and written to a file.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "kiln/calibrator.h"

namespace kiln::build {

struct FileCalibratorOptions {
  std::string data;       // folder or .npz; empty: no data (the cache must exist)
  std::string cacheFile;  // empty: no cache
  CalibrationAlgoType algorithm = CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  double percentile = 99.99;
  bool progress = true;  // a progress line on stderr
};

class KILN_INTERNAL_API FileCalibrator : public IInt8Calibrator {
 public:
  /// Lists the samples (throws naming the path when there are none or it cannot be read).
  explicit FileCalibrator(FileCalibratorOptions options);

  int32_t getBatchSize() const noexcept override { return 1; }
  int32_t getNbBatches() const noexcept override { return static_cast<int32_t>(samples_); }
  bool getBatch(void* bindings[], const char* names[], int32_t nbBindings) noexcept override {
    return false;
  }
  bool getBatchTensors(const std::vector<CalibrationInput>& inputs,
                       std::vector<Tensor>& batch) override;
  const void* readCalibrationCache(size_t& length) noexcept override;
  void writeCalibrationCache(const void* cache, size_t length) noexcept override;
  CalibrationAlgoType getAlgorithm() const noexcept override { return options_.algorithm; }
  double getPercentile() const noexcept override { return options_.percentile; }
  void reportProgress(int64_t samplesDone, int64_t samplesTotal,
                      double secondsLeft) noexcept override;

  /// A cache file could not be written (writeCalibrationCache cannot throw); empty if none.
  const std::string& cacheWriteError() const { return cacheWriteError_; }

 private:
  Tensor sample(const CalibrationInput& input, int64_t index) const;

  FileCalibratorOptions options_;
  int64_t samples_ = 0;
  int64_t next_ = 0;
  std::vector<std::string> folders_;       // folder layout: one per sample, sorted
  std::map<std::string, Tensor> stacked_;  // .npz layout: by input name
  std::string cache_;
  std::string cacheWriteError_;
};

}  // namespace kiln::build
