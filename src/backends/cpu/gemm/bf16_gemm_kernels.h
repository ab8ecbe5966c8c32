// The BF16 GEMM micro-kernel and run-time packers (bf16_gemm_kernel_avx512bf16.cpp), internal to
// the gemm folder: bf16_gemm.cpp blocks the product and calls them through this table.
#pragma once
#include <cstdint>

namespace kiln::cpu {

/// The register tile: what 32 zmm registers hold with two B vectors (16 columns x 2 depths each)
/// and one A broadcast per depth pair, the rest accumulators (2 per row).
constexpr int kBf16GemmRegisters = 32;
constexpr int kBf16GemmNrVectors = 2;
constexpr int64_t kBf16GemmNr = 16 * kBf16GemmNrVectors;
constexpr int64_t kBf16GemmMr = (kBf16GemmRegisters - kBf16GemmNrVectors - 1) / kBf16GemmNrVectors;

/// c[rows x cols] (row stride ldc) = (accumulate ? c : 0) + a * b over `pairs` depth pairs, a an
/// A strip (mr words per pair) and b a B strip (nr words per pair) in bf16_gemm.h's layout.
/// rows <= mr, cols <= nr; C outside them is not touched.
using Bf16MicroKernelFn = void (*)(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c,
                                   int64_t ldc, int64_t rows, int64_t cols, bool accumulate);

/// Packs one strip from float32 in BF16: `outer` rows of A (row stride ld, depths contiguous)
/// or columns of B (depths at stride ld, columns contiguous) over `depth` depths into `pairs`
/// pairs (pairs >= ceil(depth / 2)); lanes and depths beyond them are zero.
using Bf16PackStripFn = void (*)(int64_t outer, const float* src, int64_t ld, int64_t depth,
                                 int64_t pairs, uint32_t* dst);

struct Bf16GemmKernelInfo {
  const char* name;
  Bf16MicroKernelFn kernel;
  Bf16PackStripFn packARows;     // row-major A
  Bf16PackStripFn packBColumns;  // row-major B
};

/// bf16_gemm_14x32_avx512bf16 (call only when the CPU has AVX512_BF16).
const Bf16GemmKernelInfo& bf16GemmKernelAvx512Bf16();

}  // namespace kiln::cpu
