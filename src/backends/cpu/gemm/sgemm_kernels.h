// The SGEMM micro-kernels, one per ISA, with the cache blocking each is tuned for. Internal to
// the gemm folder: sgemm.cpp packs panels in the layout below and picks a kernel by ISA.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu_isa.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// c[rows x cols] (row stride ldc) = (accumulate ? c : 0) + a * b over kc steps, where a is an
/// A strip packed k-major (mr values per k, rows beyond `rows` zero) and b a B strip packed
/// k-major (nr values per k, zero-padded). rows <= mr, cols <= nr; C outside them is not touched.
using SgemmMicroKernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c,
                                    int64_t ldc, int64_t rows, int64_t cols, bool accumulate);

/// Packs one A strip: `rows` rows (<= mr; the rest of the strip zero) of alpha*op(A) over kc
/// depths, k-major (mr values per k), as the micro-kernel reads it. src is op(A)(0, 0) of the
/// strip: rows of A at stride lda, or (trans) depths of A at stride lda.
using SgemmPackAFn = void (*)(int64_t rows, bool trans, const float* src, int64_t lda, int64_t kc,
                              float alpha, float* dst);

struct SgemmKernelInfo {
  CpuIsa isa;
  const char* name;
  int64_t mr, nr;  // register tile
  int64_t kc;      // depth of a packed block
  int64_t mc;      // rows of a packed A block, a multiple of mr
  int64_t nc;      // columns of a packed kc x nc B panel; a multiple of nr
  // Which strip the inner loop keeps in L1: the A strip (BLIS order: B strips stream from an
  // L2-sized panel) or the B strip (A strips stream from an L2-sized block).
  bool aStripInL1;
  SgemmMicroKernelFn kernel;
  SgemmPackAFn packA;  // an ISA-specific A packer, or nullptr for sgemm.cpp's generic one
  // The kernel for a B packed whole beforehand (weights, coming from memory rather than from a
  // panel just packed into L2), or nullptr to use `kernel` for it too.
  SgemmMicroKernelFn kernelPrepackedB = nullptr;
};

KILN_INTERNAL_API const SgemmKernelInfo& sgemmKernelAvx2();  // f32_gemm_6x16_fma3
KILN_INTERNAL_API const SgemmKernelInfo&
sgemmKernelAvx512();  // f32_gemm_14x32_avx512 (call only when the CPU has AVX-512)

/// The kernel for an ISA (AVX-512 only if requested and detected).
const SgemmKernelInfo& sgemmKernelFor(CpuIsa isa);

}  // namespace kiln::cpu
