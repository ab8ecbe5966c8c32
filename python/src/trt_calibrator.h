// INT8 calibrators written in Python (subclasses of kiln.IInt8EntropyCalibrator2 and the others,
// python/kiln/_calibrator.py, as TensorRT's Python samples write them) behind kiln's
// IInt8Calibrator.
#pragma once
#include <string>

#include "bindings.h"
#include "kiln/calibrator.h"

namespace kiln::python {

/// Calls the Python object's get_batch_size, get_batch(names), read_calibration_cache,
/// write_calibration_cache, get_algorithm (and get_percentile), taking the GIL for each call.
/// get_batch returns a list of numpy arrays (or host pointers as ints), one per name, or None /
/// an empty list when no batch is left.
class PyCalibrator : public IInt8Calibrator {
 public:
  explicit PyCalibrator(nb::handle calibrator);
  ~PyCalibrator() override;
  PyCalibrator(const PyCalibrator&) = delete;
  PyCalibrator& operator=(const PyCalibrator&) = delete;

  int32_t getBatchSize() const noexcept override;
  bool getBatch(void* bindings[], const char* names[], int32_t nbBindings) noexcept override {
    return false;
  }
  bool getBatchTensors(const std::vector<CalibrationInput>& inputs,
                       std::vector<Tensor>& batch) override;
  const void* readCalibrationCache(std::size_t& length) noexcept override;
  void writeCalibrationCache(const void* cache, std::size_t length) noexcept override;
  CalibrationAlgoType getAlgorithm() const noexcept override { return algorithm_; }
  double getPercentile() const noexcept override { return percentile_; }

 private:
  nb::object calibrator_;
  CalibrationAlgoType algorithm_;
  double percentile_ = 99.99;
  std::string cache_;
};

/// kiln.CalibrationAlgoType.
void bindTrtCalibrator(nb::module_& m);

}  // namespace kiln::python
