// Reproducible random test data.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace kiln::testing {

/// n floats uniform in [lo, hi), the same for the same seed.
inline std::vector<float> randomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace kiln::testing
