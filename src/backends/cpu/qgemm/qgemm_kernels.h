// The 8-bit GEMM micro-kernels, one per ISA, and the strip layout they read. Internal to the
// qgemm folder: qgemm_pack.cpp writes strips in this layout and qgemm.cpp picks a kernel by ISA.
//
// Layout: a left operand is cut into strips of mr rows, a right one into strips of nr columns;
// a strip holds ceil(K / 4) groups of 4 consecutive k, each group `width` 32-bit lanes (one per
// row or column) of 4 bytes (k = 4g .. 4g+3), zero past K and past the last row / column. One
// lane is what vpdpbusd multiplies and sums into one int32.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/qgemm/qgemm_epilogue.h"

namespace kiln::cpu {

/// tile[mr x nr] (row stride nr) = L strip x R strip over kGroups groups of 4 k, rows < `rows`
/// computed (the others left undefined). leftUnsigned: the left strip holds the u8 operand (it
/// is broadcast) and the right one the s8 operand, else the other way round.
using QGemmMicroKernelFn = void (*)(int64_t kGroups, const uint8_t* left, const uint8_t* right,
                                    int32_t* tile, int64_t rows, bool leftUnsigned);

struct QGemmKernelInfo {
  CpuIsa isa;
  const char* name;  // u8s8_gemm_<mr>x<nr>_<isa>
  int64_t mr, nr;
  QGemmMicroKernelFn kernel;
  /// AVX2 only: the vpmaddubsw kernel that is exact when the s8 operand is maddubsSafe; null
  /// where `kernel` is exact for every input.
  QGemmMicroKernelFn kernelMaddubs = nullptr;
  /// The epilogue for its tiles (as wide as its vectors).
  QTileFinishFn finish = finishQTile;
};

const QGemmKernelInfo& qgemmKernelAvx2();
const QGemmKernelInfo& qgemmKernelAvxVnni();     // call only when the CPU has AVX-VNNI
const QGemmKernelInfo& qgemmKernelAvx512Vnni();  // call only when the CPU has AVX512-VNNI

/// The kernel of kAvx512Vnni, kAvxVnni or kAvx2.
const QGemmKernelInfo& qgemmKernelFor(CpuIsa isa);

inline int64_t qgemmKGroups(int64_t K) { return (K + 3) / 4; }

}  // namespace kiln::cpu
