#include "engine/plan_format.h"

namespace kiln::plan {

uint32_t detectCpuFeatures() {
  __builtin_cpu_init();
  uint32_t f = 0;
  if (__builtin_cpu_supports("avx2")) f |= kAvx2;
  if (__builtin_cpu_supports("fma")) f |= kFma;
  if (__builtin_cpu_supports("f16c")) f |= kF16c;
  if (__builtin_cpu_supports("avx512f")) f |= kAvx512f;
  return f;
}

std::string cpuFeatureNames(uint32_t features) {
  static const char* names[] = {"avx2", "fma", "f16c", "avx512f"};
  std::string s;
  for (uint32_t bit = 0; bit < 32; ++bit) {
    if (!(features & (1u << bit))) continue;
    if (!s.empty()) s += ' ';
    s += bit < 4 ? names[bit] : "bit" + std::to_string(bit);
  }
  return s.empty() ? "none" : s;
}

}  // namespace kiln::plan
