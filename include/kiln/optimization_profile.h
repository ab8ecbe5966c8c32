// Optimization profiles: per dynamic input, the smallest, typical and largest shapes an engine is
// built for (BuilderConfig::addOptimizationProfile) and that its contexts accept
// (ExecutionContext::setOptimizationProfile), as TensorRT's IOptimizationProfile.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

enum class OptProfileSelector { kMIN = 0, kOPT = 1, kMAX = 2 };

/// For each dynamic input: the smallest, typical and largest dims it will be run with (and for
/// shape inputs, the range of their values).
class KILN_API OptimizationProfile {
 public:
  void setDimensions(const std::string& inputName, OptProfileSelector which, const Shape& dims);
  /// Empty when not set.
  Shape getDimensions(const std::string& inputName, OptProfileSelector which) const;
  void setShapeValues(const std::string& inputName, OptProfileSelector which,
                      const std::vector<int64_t>& values);
  std::vector<int64_t> getShapeValues(const std::string& inputName, OptProfileSelector which) const;
  /// Inputs that have dims or values set.
  std::vector<std::string> inputNames() const;

 private:
  struct Entry {
    Shape dims[3];
    std::vector<int64_t> values[3];
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace kiln
