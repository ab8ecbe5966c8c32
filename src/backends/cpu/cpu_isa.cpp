#include "backends/cpu/cpu_isa.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>

namespace kiln::cpu {
namespace {

constexpr int kNoLimit = 1 << 30;
std::atomic<int> isaLimit{kNoLimit};

// A CPUID leaf 7 feature bit (reg: 0 eax, 1 ebx, 2 ecx, 3 edx), for the features that
// __builtin_cpu_supports does not know in every compiler kiln builds with (clang 14, the fuzz
// build's, lacks "avx512fp16" and "avxvnni").
bool cpuidLeaf7Bit(unsigned subleaf, int reg, unsigned bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(7, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}

// Bit k set: the CPU has CpuIsa level k.
unsigned detect() {
  __builtin_cpu_init();
  // libgcc's __builtin_cpu_supports reports AVX-512 only when XCR0 shows the OS saves zmm state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  const bool vnni512 = avx512 && __builtin_cpu_supports("avx512vnni");
  const bool bf16 = vnni512 && __builtin_cpu_supports("avx512bf16");
  const bool fp16 = bf16 && cpuidLeaf7Bit(0, 3, 23);
  auto bit = [](CpuIsa isa, bool has) { return has ? 1u << static_cast<int>(isa) : 0u; };
  return bit(CpuIsa::kAvx2, true) | bit(CpuIsa::kAvxVnni, cpuidLeaf7Bit(1, 0, 4)) |
         bit(CpuIsa::kAvx512, avx512) | bit(CpuIsa::kAvx512Vnni, vnni512) |
         bit(CpuIsa::kAvx512Bf16, bf16) | bit(CpuIsa::kAvx512Fp16, fp16);
}

unsigned detectedLevels() {
  static const unsigned levels = detect();
  return levels;
}

}  // namespace

bool cpuHas(CpuIsa isa) { return (detectedLevels() >> static_cast<int>(isa)) & 1u; }

bool cpuSupports(CpuIsa isa) {
  return cpuHas(isa) && static_cast<int>(isa) <= isaLimit.load(std::memory_order_relaxed);
}

bool cpuSupportsAvx512Vbmi() {
  static const bool vbmi = cpuHas(CpuIsa::kAvx512) && __builtin_cpu_supports("avx512vbmi");
  return vbmi && cpuSupports(CpuIsa::kAvx512);
}

CpuIsa detectedCpuIsa() { return cpuHas(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : CpuIsa::kAvx2; }

CpuIsa activeCpuIsa() { return cpuSupports(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : CpuIsa::kAvx2; }

void setCpuIsaLimit(CpuIsa limit) {
  isaLimit.store(static_cast<int>(limit), std::memory_order_relaxed);
}
void clearCpuIsaLimit() { isaLimit.store(kNoLimit, std::memory_order_relaxed); }

const char* cpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvxVnni:
      return "avxvnni";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Vnni:
      return "avx512vnni";
    case CpuIsa::kAvx512Bf16:
      return "avx512bf16";
    case CpuIsa::kAvx512Fp16:
      return "avx512fp16";
  }
  return "unknown";
}

ScopedCpuIsaLimit::ScopedCpuIsaLimit(CpuIsa limit) : previous_(isaLimit.load()) {
  setCpuIsaLimit(limit);
}
ScopedCpuIsaLimit::~ScopedCpuIsaLimit() { isaLimit.store(previous_); }

}  // namespace kiln::cpu
