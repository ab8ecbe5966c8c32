#include "kiln/builder.h"

namespace kiln {

void OptimizationProfile::setDimensions(const std::string& inputName, OptProfileSelector which,
                                        const Shape& dims) {
  entries_[inputName].dims[static_cast<int>(which)] = dims;
}

Shape OptimizationProfile::getDimensions(const std::string& inputName,
                                         OptProfileSelector which) const {
  auto it = entries_.find(inputName);
  return it == entries_.end() ? Shape{} : it->second.dims[static_cast<int>(which)];
}

void OptimizationProfile::setShapeValues(const std::string& inputName, OptProfileSelector which,
                                         const std::vector<int64_t>& values) {
  entries_[inputName].values[static_cast<int>(which)] = values;
}

std::vector<int64_t> OptimizationProfile::getShapeValues(const std::string& inputName,
                                                         OptProfileSelector which) const {
  auto it = entries_.find(inputName);
  return it == entries_.end() ? std::vector<int64_t>{} : it->second.values[static_cast<int>(which)];
}

std::vector<std::string> OptimizationProfile::inputNames() const {
  std::vector<std::string> names;
  for (const auto& kv : entries_) names.push_back(kv.first);
  return names;
}

int BuilderConfig::addOptimizationProfile(const OptimizationProfile& profile) {
  profiles_.push_back(profile);
  return static_cast<int>(profiles_.size()) - 1;
}

}  // namespace kiln
