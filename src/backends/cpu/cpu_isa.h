// The instruction set the CPU kernels dispatch on at run time. The build baseline is AVX2+FMA;
// kernels compiled for AVX-512 (files named *_avx512.cpp) run only when activeCpuIsa() says so.
#pragma once

namespace kiln::cpu {

/// Ordered: a higher value implies every lower one.
enum class CpuIsa { kAvx2 = 0, kAvx512 = 1 };

/// The best ISA this CPU and OS support (AVX-512 needs F, VL, BW and DQ and the OS saving zmm state).
CpuIsa detectedCpuIsa();

/// The ISA kernels should use now: the detected one, capped by setCpuIsaLimit.
CpuIsa activeCpuIsa();

/// Caps the ISA kernels use (tests and benchmarks force the AVX2 path with it); a limit above the
/// detected ISA has no effect. Process-wide.
void setCpuIsaLimit(CpuIsa limit);
void clearCpuIsaLimit();

/// "avx2" or "avx512".
const char* cpuIsaName(CpuIsa isa);

/// Sets a limit for its lifetime and restores the previous one after.
class ScopedCpuIsaLimit {
 public:
  explicit ScopedCpuIsaLimit(CpuIsa limit);
  ~ScopedCpuIsaLimit();
  ScopedCpuIsaLimit(const ScopedCpuIsaLimit&) = delete;
  ScopedCpuIsaLimit& operator=(const ScopedCpuIsaLimit&) = delete;

 private:
  int previous_;
};

}  // namespace kiln::cpu
