#include "tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::cli {

namespace {

bool hasNumbers(const Tensor& t) {
  return !t.isSequence() && !t.isMap() && !t.isNone() && t.dtype() != DataType::kString;
}

}  // namespace

TensorDiff compareTensors(const std::string& name, const Tensor& tested, const Tensor& reference,
                          const Tolerance& tolerance) {
  TensorDiff diff;
  diff.name = name;
  diff.minSnrDb = tolerance.minSnrDb;
  if (!hasNumbers(tested) || !hasNumbers(reference)) {
    diff.problem = "not compared: " + tested.describe() + " against " + reference.describe();
    diff.skipped = true;
    return diff;
  }
  if (tested.shape() != reference.shape()) {
    diff.problem = "shape " + shapeToString(tested.shape()) + ", reference " +
                   shapeToString(reference.shape());
    return diff;
  }
  if (tested.dtype() != reference.dtype()) {
    diff.problem =
        "type " + dataTypeName(tested.dtype()) + ", reference " + dataTypeName(reference.dtype());
    return diff;
  }
  diff.elements = tested.numel();
  int64_t counted = 0;
  double sumAbs = 0, dot = 0, testedSq = 0, referenceSq = 0, errorSq = 0;
  for (int64_t i = 0; i < diff.elements; ++i) {
    const double a = tested.doubleAt(i), r = reference.doubleAt(i);
    if ((std::isnan(a) && std::isnan(r)) || (std::isinf(a) && a == r))
      continue;  // the same non-finite value
    const double d = std::fabs(a - r);
    if (!std::isfinite(d)) {  // a NaN or infinity on one side only: outside any tolerance
      ++diff.mismatches;
      ++diff.nonFinite;
      continue;
    }
    if (d > tolerance.atol + tolerance.rtol * std::fabs(r)) ++diff.mismatches;
    diff.maxAbs = std::max(diff.maxAbs, d);
    if (r != 0) diff.maxRel = std::max(diff.maxRel, d / std::fabs(r));
    ++counted;
    sumAbs += d;
    dot += a * r;
    testedSq += a * a;
    referenceSq += r * r;
    errorSq += d * d;
  }
  if (counted) diff.meanAbs = sumAbs / static_cast<double>(counted);
  if (testedSq == 0 && referenceSq == 0)
    diff.cosine = 1;
  else if (testedSq == 0 || referenceSq == 0)
    diff.cosine = 0;
  else
    diff.cosine = dot / std::sqrt(testedSq * referenceSq);
  diff.snrDb = errorSq == 0 ? std::numeric_limits<double>::infinity()
                            : 10 * std::log10(referenceSq / errorSq);
  return diff;
}

}  // namespace kiln::cli
