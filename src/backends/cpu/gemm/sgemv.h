// Matrix-vector products for sgemm's M == 1 and N == 1 cases (a classifier's Gemm on one image):
// each weight is used once, so these stream the matrix at memory bandwidth, several rows (or
// packed strips) at a time with software prefetch, split over the current thread pool by outputs,
// with the GEMM epilogue applied to each thread's outputs while they are in L1. Internal to the
// gemm folder (sgemm.cpp calls them).
#pragma once
#include <cstdint>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/gemm_epilogue.h"

namespace kiln::cpu::detail {

/// y[i * incY] = ep(alpha * sum_k P(i, k) * x[k * incX] + beta * y[i * incY]) for i < L, where
/// P(i, k) is P[i * ld + k] (rowMajor) or P[k * ld + i]. beta == 0: y is not read. ep (may be
/// null) is indexed as a 1 x L row when rowOutput (M == 1) or as an L x 1 column otherwise.
/// `scratch` holds sgemvScratchFloats(L, K) floats, 64-byte aligned.
void sgemv(int64_t L, int64_t K, float alpha, const float* P, int64_t ld, bool rowMajor,
           const float* x, int64_t incX, float beta, float* y, int64_t incY, const GemmEpilogue* ep,
           bool rowOutput, float* scratch);

/// Scratch floats of sgemv with L outputs over depth K: alpha * x gathered, and the sums.
int64_t sgemvScratchFloats(int64_t L, int64_t K);

/// y[0 .. N) = ep(alpha * x op(B) + beta * y) for a B packed whole by packB (nr-column strips,
/// zero-padded to `padded` columns, in blocks of kc depths: the block at depth k0 starts at
/// packed + k0 * padded and holds strip s at + s * nr * kc, nr values per depth).
/// x[k * incX] for k < K; nr is a multiple of 8; `isa` is the one B was packed for. `scratch`
/// holds sgemvScratchFloats(padded, K) floats, 64-byte aligned.
void sgemvPacked(CpuIsa isa, int64_t N, int64_t K, int64_t nr, int64_t kc, int64_t padded,
                 float alpha, const float* x, int64_t incX, const float* packed, float beta,
                 float* y, const GemmEpilogue* ep, float* scratch);

/// sgemvPacked over a B packed in half precision (PackedHalfMatrix; nr 16 or 32).
void sgemvPackedHalf(CpuIsa isa, int64_t N, int64_t K, int64_t nr, int64_t kc, int64_t padded,
                     float alpha, const float* x, int64_t incX, const uint16_t* packed, float beta,
                     float* y, const GemmEpilogue* ep, float* scratch);

/// The sums of strips [s0, s1) of a B packed for the AVX-512 kernel (nr 32) with xs, to
/// out[0 .. (s1 - s0) * 32); sgemv_avx512.cpp, called only on a CPU with AVX-512.
void packedStripsAvx512(const float* packed, int64_t K, int64_t kc, int64_t padded, int64_t s0,
                        int64_t s1, const float* xs, float* out);
/// The same over a B packed in half precision.
void packedHalfStripsAvx512(const uint16_t* packed, int64_t K, int64_t kc, int64_t padded,
                            int64_t s0, int64_t s1, const float* xs, float* out);

}  // namespace kiln::cpu::detail
