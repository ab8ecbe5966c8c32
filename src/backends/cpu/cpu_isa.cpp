#include "backends/cpu/cpu_isa.h"

#include <algorithm>
#include <atomic>

namespace kiln::cpu {
namespace {

constexpr int kNoLimit = 1 << 30;
std::atomic<int> isaLimit{kNoLimit};

CpuIsa detect() {
  __builtin_cpu_init();
  // libgcc's __builtin_cpu_supports reports AVX-512 only when XCR0 shows the OS saves zmm state.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return avx512 ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
}

}  // namespace

CpuIsa detectedCpuIsa() {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa activeCpuIsa() {
  return static_cast<CpuIsa>(std::min(static_cast<int>(detectedCpuIsa()), isaLimit.load(std::memory_order_relaxed)));
}

void setCpuIsaLimit(CpuIsa limit) { isaLimit.store(static_cast<int>(limit), std::memory_order_relaxed); }
void clearCpuIsaLimit() { isaLimit.store(kNoLimit, std::memory_order_relaxed); }

const char* cpuIsaName(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? "avx512" : "avx2"; }

ScopedCpuIsaLimit::ScopedCpuIsaLimit(CpuIsa limit) : previous_(isaLimit.load()) { setCpuIsaLimit(limit); }
ScopedCpuIsaLimit::~ScopedCpuIsaLimit() { isaLimit.store(previous_); }

}  // namespace kiln::cpu
