// The instruction set the CPU kernels dispatch on at run time. The build baseline is AVX2+FMA;
// kernels compiled for an extension (files named *_avx512.cpp, *_avx512vnni.cpp, *_avx512bf16.cpp,
// *_avx512fp16.cpp, *_avxvnni.cpp; CMakeLists.txt gives each its -m flags) run only when
// cpuSupports() says so.
#pragma once
#include "core/internal_api.h"

namespace kiln::cpu {

/// Levels a kernel may need, ordered so that a limit caps them (setCpuIsaLimit). kAvx512 is
/// F + VL + BW + DQ with the OS saving zmm state; each level above it adds one extension to it
/// (every CPU with AVX512_BF16 also has AVX512_VNNI, every one with AVX512_FP16 has both), so a
/// level above kAvx512 implies kAvx512. kAvxVnni (the VEX-encoded vpdpbusd on ymm) is an AVX2
/// extension that some AVX-512 CPUs lack (AMD Zen 4): ask cpuSupports(), never compare with it.
enum class CpuIsa {
  kAvx2 = 0,
  kAvxVnni = 1,
  kAvx512 = 2,
  kAvx512Vnni = 3,
  kAvx512Bf16 = 4,
  kAvx512Fp16 = 5
};

/// The vector width this CPU and OS support: kAvx512 or kAvx2 (never an extension level).
KILN_INTERNAL_API CpuIsa detectedCpuIsa();

/// The vector width kernels should use now: the detected one, capped by setCpuIsaLimit.
KILN_INTERNAL_API CpuIsa activeCpuIsa();

/// Whether kernels may use `isa` now: this CPU has it and it is within setCpuIsaLimit's cap.
KILN_INTERNAL_API bool cpuSupports(CpuIsa isa);

/// Whether this CPU has `isa`, whatever the limit.
KILN_INTERNAL_API bool cpuHas(CpuIsa isa);

/// Whether kernels may use AVX512-VBMI's byte permutes now (Ice Lake, Sapphire Rapids, Zen 4):
/// not a level of its own (Cascade Lake has VNNI without it), so beside the levels, under
/// kAvx512's limit.
KILN_INTERNAL_API bool cpuSupportsAvx512Vbmi();

/// Caps the ISA kernels use (tests and benchmarks force the AVX2 path with it); a limit above the
/// detected ISA has no effect. Process-wide.
KILN_INTERNAL_API void setCpuIsaLimit(CpuIsa limit);
KILN_INTERNAL_API void clearCpuIsaLimit();

/// "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16" or "avx512fp16".
KILN_INTERNAL_API const char* cpuIsaName(CpuIsa isa);

/// Sets a limit for its lifetime and restores the previous one after.
class KILN_INTERNAL_API ScopedCpuIsaLimit {
 public:
  explicit ScopedCpuIsaLimit(CpuIsa limit);
  ~ScopedCpuIsaLimit();
  ScopedCpuIsaLimit(const ScopedCpuIsaLimit&) = delete;
  ScopedCpuIsaLimit& operator=(const ScopedCpuIsaLimit&) = delete;

 private:
  int previous_;
};

}  // namespace kiln::cpu
