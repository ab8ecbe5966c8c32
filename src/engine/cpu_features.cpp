#include "engine/plan_format.h"

#include <cpuid.h>

#include "backends/cpu/cpu_isa.h"

namespace kiln::plan {

uint32_t detectCpuFeatures() {
  __builtin_cpu_init();
  uint32_t f = 0;
  if (__builtin_cpu_supports("avx2")) f |= kAvx2;
  if (__builtin_cpu_supports("fma")) f |= kFma;
  // CPUID rather than __builtin_cpu_supports("f16c"), which clang 14 (the fuzz build) lacks.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C)) f |= kF16c;
  // The extension bits as the kernels see them (cpu::cpuHas), so that a plan's kernel ISA and this
  // machine's features are compared the same way.
  if (cpu::cpuHas(cpu::CpuIsa::kAvx512)) f |= kAvx512f;
  if (cpu::cpuHas(cpu::CpuIsa::kAvxVnni)) f |= kAvxVnni;
  if (cpu::cpuHas(cpu::CpuIsa::kAvx512Vnni)) f |= kAvx512Vnni;
  if (cpu::cpuHas(cpu::CpuIsa::kAvx512Bf16)) f |= kAvx512Bf16;
  if (cpu::cpuHas(cpu::CpuIsa::kAvx512Fp16)) f |= kAvx512Fp16;
  return f;
}

std::string cpuFeatureNames(uint32_t features) {
  static const char* names[] = {"avx2",    "fma",        "f16c",       "avx512f",
                                "avxvnni", "avx512vnni", "avx512bf16", "avx512fp16"};
  std::string s;
  for (uint32_t bit = 0; bit < 32; ++bit) {
    if (!(features & (1u << bit))) continue;
    if (!s.empty()) s += ' ';
    s += bit < 8 ? names[bit] : "bit" + std::to_string(bit);
  }
  return s.empty() ? "none" : s;
}

}  // namespace kiln::plan
