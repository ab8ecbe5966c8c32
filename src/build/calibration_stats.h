// What INT8 calibration records of one tensor, and the range each calibrator chooses from it
// (docs/precision.md, "INT8: calibration").
#pragma once
#include <cstdint>
#include <vector>

#include "core/internal_api.h"
#include "kiln/calibrator.h"

namespace kiln::build {

/// Bins of the |x| histograms (entropy, percentile), and the 8-bit levels of |x| entropy compares
/// against.
constexpr int kHistogramBins = 2048;
constexpr int kQuantizedLevels = 128;

/// The smallest and largest value of a tensor over every batch (pass 1), then the histogram of |x|
/// over [0, absMax()] (pass 2, after startHistogram). NaN values are not counted.
class KILN_INTERNAL_API TensorStatistics {
 public:
  void observeRange(const float* x, int64_t n);
  void startHistogram(int bins = kHistogramBins);
  void observeHistogram(const float* x, int64_t n);

  bool seen() const { return seen_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double absMax() const;
  const std::vector<double>& histogram() const { return histogram_; }
  double binWidth() const { return binWidth_; }

 private:
  bool seen_ = false;
  double min_ = 0, max_ = 0;
  std::vector<double> histogram_;
  double binWidth_ = 0;
};

/// TensorRT's entropy threshold: for each candidate of i >= levels bins, the reference P is the
/// first i bins with the mass beyond them added to bin i-1, and Q is the first i bins merged into
/// `levels` groups and spread back evenly over each group's non-empty bins; the i of the least
/// KL(P || Q) wins (the smallest on a tie; a candidate where Q is 0 and P is not never does) and
/// the threshold is its upper edge, i bin widths. Bin 0 (the zeros) is counted as bin 1.
KILN_INTERNAL_API double entropyThreshold(const std::vector<double>& histogram, double binWidth,
                                          int levels = kQuantizedLevels);

/// The upper edge of the first bin at which the histogram's cumulative share reaches `percentile`
/// %.
KILN_INTERNAL_API double percentileThreshold(const std::vector<double>& histogram, double binWidth,
                                             double percentile);

/// The range an activation is quantized over; symmetric ranges are [-threshold, threshold].
struct ActivationRange {
  double min = 0, max = 0;
  bool symmetric = false;
};

/// Whether the calibrator needs the histogram pass.
bool needsHistogram(CalibrationAlgoType algo);

/// `percentile` is only read by kPERCENTILE_CALIBRATION. Entropy and percentile give [-T, T], or
/// [0, T] (not symmetric) for a tensor that was never negative.
KILN_INTERNAL_API ActivationRange chooseRange(const TensorStatistics& stats,
                                              CalibrationAlgoType algo, double percentile);

/// Signed 8-bit parameters of a range: symmetric: scale = threshold / 127, zero point 0;
/// otherwise (the range widened to hold 0) scale = (max - min) / 255 and the zero point that
/// maps min to -128, as ONNX Runtime's quantizer does. A zero range gets scale 1.
struct Int8Params {
  float scale = 1;
  int32_t zeroPoint = 0;
};
KILN_INTERNAL_API Int8Params int8Params(const ActivationRange& range);

}  // namespace kiln::build
