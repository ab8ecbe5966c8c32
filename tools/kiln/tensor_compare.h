// `kiln compare`: the error metrics of one tensor against its reference, as Polygraphy's
// `run --compare` reports them, and whether it passes a tolerance.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln::cli {

/// An element passes when |tested - reference| <= atol + rtol * |reference| (numpy's isclose).
/// With minSnrDb the verdict is the tensor's SNR instead: it passes when its SNR is at least that
/// and no element is non-finite on one side only (elements outside atol/rtol are still counted).
struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-3;
  std::optional<double> minSnrDb;
};

/// How one tensor differs from its reference, d = tested - reference elementwise. Metrics are
/// computed in double over the elements where d is finite (equal NaNs or infinities on both sides
/// are left out and pass): maxRel takes |d| / |reference| over those whose reference is not 0;
/// cosine is 1 when both are all zeros, 0 when one is; snrDb is 10 log10(sum reference^2 / sum
/// d^2), +inf when they are equal.
struct TensorDiff {
  std::string name;
  /// Why the tensors were not compared element by element ("" when they were): a shape or type
  /// mismatch (a failure), or a kind with no numbers (strings, sequences), which is skipped.
  std::string problem;
  bool skipped = false;  // problem is a kind kiln compare does not compare, not a failure
  int64_t elements = 0;
  double maxAbs = 0;
  double maxRel = 0;
  double meanAbs = 0;
  double cosine = 1;
  double snrDb = 0;
  int64_t mismatches = 0;          // elements outside the tolerance, nonFinite included
  int64_t nonFinite = 0;           // elements with a NaN or infinity on one side only
  std::optional<double> minSnrDb;  // Tolerance::minSnrDb: the verdict is the SNR when set
  bool passed() const {
    if (skipped) return true;
    if (!problem.empty()) return false;
    return minSnrDb ? nonFinite == 0 && snrDb >= *minSnrDb : mismatches == 0;
  }
};

TensorDiff compareTensors(const std::string& name, const Tensor& tested, const Tensor& reference,
                          const Tolerance& tolerance);

}  // namespace kiln::cli
