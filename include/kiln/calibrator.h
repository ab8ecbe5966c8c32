// INT8 post-training calibration, as TensorRT's IInt8Calibrator family: the builder (with
// BuilderFlag::kINT8 and BuilderConfig::setInt8Calibrator) runs the float network on the batches a
// calibrator hands out, records the range of every tensor that a quantized layer reads or writes,
// and quantizes those layers (docs/precision.md, "INT8: calibration").
//
//   class MyCalibrator : public kiln::IInt8EntropyCalibrator2 {
//     int32_t getBatchSize() const noexcept override { return 8; }
//     bool getBatch(void* bindings[], const char* names[], int32_t n) noexcept override {
//       if (next_ == batches_.size()) return false;           // no more batches
//       std::memcpy(bindings[0], batches_[next_++].data(), bytes_);  // names[0] == "input"
//       return true;
//     }
//     const void* readCalibrationCache(size_t& length) noexcept override { length = 0; return
//     nullptr; } void writeCalibrationCache(const void* data, size_t length) noexcept override { /*
//     save it */ }
//   };
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

/// How activation ranges are chosen (TensorRT's numbering, plus kiln's percentile).
enum class CalibrationAlgoType : int32_t {
  kENTROPY_CALIBRATION_2 = 2,   // the threshold of least KL divergence (TensorRT's algorithm)
  kMINMAX_CALIBRATION = 3,      // the smallest and largest value seen
  kPERCENTILE_CALIBRATION = 4,  // the given percentile of |x|
};

/// "entropy", "minmax" or "percentile".
KILN_API const char* calibrationAlgoName(CalibrationAlgoType type);

/// A network input the calibrator feeds: its name, type and the shape a batch must have (-1 where
/// any size is accepted: a dynamic dimension without an optimization profile).
struct CalibrationInput {
  std::string name;
  DataType dtype = DataType::kFloat32;
  Shape dims;
};

class KILN_API IInt8Calibrator {
 public:
  virtual ~IInt8Calibrator() = default;
  /// Samples per batch (only used to count samples in the progress line).
  virtual int32_t getBatchSize() const noexcept = 0;
  /// Fills bindings[i], a host buffer of input names[i]'s type and calibration shape (float32 for a
  /// float input), for every i < nbBindings; returns false when there are no more batches.
  virtual bool getBatch(void* bindings[], const char* names[], int32_t nbBindings) noexcept = 0;
  /// A cache written by an earlier calibration (length set), or nullptr: then the batches are read.
  virtual const void* readCalibrationCache(std::size_t& length) noexcept = 0;
  virtual void writeCalibrationCache(const void* cache, std::size_t length) noexcept = 0;
  virtual CalibrationAlgoType getAlgorithm() const noexcept = 0;

  // kiln's additions, with defaults.
  /// Batches it will hand out, for the progress line's ETA; -1 when unknown.
  virtual int32_t getNbBatches() const noexcept { return -1; }
  /// The next batch as tensors of their own shapes (checked against `inputs`), one per input in
  /// order; false when there are no more. By default: buffers of `inputs`' shapes passed to
  /// getBatch (which needs every dimension known). Throws kiln::Error to report a bad batch.
  virtual bool getBatchTensors(const std::vector<CalibrationInput>& inputs,
                               std::vector<Tensor>& batch);
  /// Called after each batch of each pass (entropy and percentile read the batches twice): the
  /// samples done and in all (-1: unknown) and the seconds left (-1: unknown). Nothing by default.
  virtual void reportProgress(int64_t samplesDone, int64_t samplesTotal,
                              double secondsLeft) noexcept {}
  /// The percentile of |x| that kPERCENTILE_CALIBRATION keeps, in (0, 100].
  virtual double getPercentile() const noexcept { return 99.99; }
};

/// Chooses each activation's threshold T by least KL divergence between the float histogram of |x|
/// and its 8-bit quantization (TensorRT's entropy calibration, version 2): the range [-T, T], or
/// [0, T] for a tensor that was never negative.
class KILN_API IInt8EntropyCalibrator2 : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() const noexcept final {
    return CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  }
};

/// The smallest and largest value seen (asymmetric ranges that include 0, as ONNX Runtime's
/// MinMax).
class KILN_API IInt8MinMaxCalibrator : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() const noexcept final {
    return CalibrationAlgoType::kMINMAX_CALIBRATION;
  }
};

/// T = the getPercentile()-th percentile of |x| (override getPercentile to choose it), ranges as
/// entropy's: outliers beyond T saturate.
class KILN_API IInt8PercentileCalibrator : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() const noexcept final {
    return CalibrationAlgoType::kPERCENTILE_CALIBRATION;
  }
};

}  // namespace kiln
