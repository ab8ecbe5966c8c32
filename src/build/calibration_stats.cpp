#include "build/calibration_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/error.h"

namespace kiln::build {

void TensorStatistics::observeRange(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (std::isnan(v)) continue;
    if (!seen_) {
      min_ = max_ = v;
      seen_ = true;
    }
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
}

double TensorStatistics::absMax() const { return std::max(std::abs(min_), std::abs(max_)); }

void TensorStatistics::startHistogram(int bins) {
  histogram_.assign(static_cast<size_t>(bins), 0.0);
  binWidth_ = absMax() / bins;
}

void TensorStatistics::observeHistogram(const float* x, int64_t n) {
  const int last = static_cast<int>(histogram_.size()) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::abs(static_cast<double>(x[i]));
    if (std::isnan(v)) continue;
    // Values beyond pass 1's range cannot occur (the same batches), but clamp all the same.
    const int bin =
        binWidth_ > 0 ? static_cast<int>(std::min(v / binWidth_, static_cast<double>(last))) : 0;
    histogram_[static_cast<size_t>(bin)] += 1;
  }
}

namespace {

// KL(P || Q) of two unnormalized distributions over the same bins; infinity where Q is 0 and P is
// not.
double klDivergence(const std::vector<double>& p, const std::vector<double>& q) {
  double pSum = 0, qSum = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    pSum += p[k];
    qSum += q[k];
  }
  double kl = 0;
  for (size_t k = 0; k < p.size(); ++k) {
    if (p[k] == 0) continue;
    if (q[k] == 0) return std::numeric_limits<double>::infinity();
    const double pk = p[k] / pSum, qk = q[k] / qSum;
    kl += pk * std::log(pk / qk);
  }
  return kl;
}

}  // namespace

double entropyThreshold(const std::vector<double>& counts, double binWidth, int levels) {
  const int bins = static_cast<int>(counts.size());
  if (bins < levels) return bins * binWidth;
  // The first bin holds every exact zero (half of a Relu's output): as it is, spreading that spike
  // over its group dominates the divergence and pushes the threshold down to the first candidate.
  // Counted as its neighbour instead, as NVIDIA's pytorch-quantization does.
  std::vector<double> histogram = counts;
  if (bins > 1) histogram[0] = histogram[1];
  double best = std::numeric_limits<double>::infinity();
  int bestBins = bins;
  std::vector<double> p, q;
  double beyond = 0;  // the mass past the first i bins
  for (int k = levels; k < bins; ++k) beyond += histogram[static_cast<size_t>(k)];
  for (int i = levels; i <= bins; ++i) {
    if (i > levels) beyond -= histogram[static_cast<size_t>(i - 1)];
    p.assign(histogram.begin(), histogram.begin() + i);
    p[static_cast<size_t>(i - 1)] += beyond;
    q.assign(static_cast<size_t>(i), 0.0);
    for (int j = 0; j < levels; ++j) {
      const int start = static_cast<int>(static_cast<int64_t>(j) * i / levels);
      const int end = static_cast<int>(static_cast<int64_t>(j + 1) * i / levels);
      double sum = 0;
      int nonEmpty = 0;
      for (int k = start; k < end; ++k) {
        sum += histogram[static_cast<size_t>(k)];
        nonEmpty += histogram[static_cast<size_t>(k)] != 0;
      }
      for (int k = start; k < end; ++k)
        if (histogram[static_cast<size_t>(k)] != 0) q[static_cast<size_t>(k)] = sum / nonEmpty;
    }
    const double kl = klDivergence(p, q);
    if (kl < best) {
      best = kl;
      bestBins = i;
    }
  }
  return bestBins * binWidth;
}

double percentileThreshold(const std::vector<double>& histogram, double binWidth,
                           double percentile) {
  if (!(percentile > 0 && percentile <= 100)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "the calibration percentile must be in (0, 100], not " + std::to_string(percentile));
  }
  double total = 0;
  for (double c : histogram) total += c;
  const double wanted = total * percentile / 100;
  double sum = 0;
  for (size_t k = 0; k < histogram.size(); ++k) {
    sum += histogram[k];
    if (sum >= wanted) return static_cast<double>(k + 1) * binWidth;
  }
  return static_cast<double>(histogram.size()) * binWidth;
}

bool needsHistogram(CalibrationAlgoType algo) {
  return algo != CalibrationAlgoType::kMINMAX_CALIBRATION;
}

ActivationRange chooseRange(const TensorStatistics& stats, CalibrationAlgoType algo,
                            double percentile) {
  switch (algo) {
    case CalibrationAlgoType::kMINMAX_CALIBRATION:
      return {std::min(stats.min(), 0.0), std::max(stats.max(), 0.0), false};
    case CalibrationAlgoType::kENTROPY_CALIBRATION_2:
    case CalibrationAlgoType::kPERCENTILE_CALIBRATION: {
      const double t = algo == CalibrationAlgoType::kENTROPY_CALIBRATION_2
                           ? entropyThreshold(stats.histogram(), stats.binWidth())
                           : percentileThreshold(stats.histogram(), stats.binWidth(), percentile);
      // A tensor never negative (a Relu's output) spends all 256 levels on [0, T].
      if (stats.min() >= 0) return {0, t, false};
      return {-t, t, true};
    }
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown calibration algorithm " + std::to_string(static_cast<int>(algo)));
}

Int8Params int8Params(const ActivationRange& range) {
  Int8Params out;
  if (range.symmetric) {
    const double t = std::max(std::abs(range.min), std::abs(range.max));
    if (t > 0) out.scale = static_cast<float>(t / 127);
    return out;
  }
  const double lo = std::min(range.min, 0.0), hi = std::max(range.max, 0.0);
  if (hi - lo <= 0) return out;
  out.scale = static_cast<float>((hi - lo) / 255);
  out.zeroPoint =
      static_cast<int32_t>(std::clamp(std::nearbyint(-128 - lo / out.scale), -128.0, 127.0));
  return out;
}

}  // namespace kiln::build

namespace kiln {

const char* calibrationAlgoName(CalibrationAlgoType type) {
  switch (type) {
    case CalibrationAlgoType::kENTROPY_CALIBRATION_2:
      return "entropy";
    case CalibrationAlgoType::kMINMAX_CALIBRATION:
      return "minmax";
    case CalibrationAlgoType::kPERCENTILE_CALIBRATION:
      return "percentile";
  }
  return "unknown";
}

}  // namespace kiln
