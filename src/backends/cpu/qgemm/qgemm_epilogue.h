// The 8-bit GEMM's epilogue on one int32 tile: the zero-point and bias terms, then the output
// conversion of QGemmOutput. Internal to the qgemm folder (and the depthwise convolution, which
// finishes its int32 rows the same way).
#pragma once
#include <cstdint>

#include "backends/cpu/qgemm/qgemm.h"

namespace kiln::cpu {

/// v[i][j] = tile[i][j] + rowAdd[i] + colAdd[j] + rowP[i] * colP[j] + rowQ[i] * colQ[j], int32
/// wrapping; every pointer already offset to the tile's first row / column, null for none (the
/// products need both of their factors).
struct QTileTerms {
  const int32_t* rowAdd = nullptr;
  const int32_t* colAdd = nullptr;
  const int32_t* rowP = nullptr;
  const int32_t* colP = nullptr;
  const int32_t* rowQ = nullptr;
  const int32_t* colQ = nullptr;
};

/// Writes the rows x cols tile (row stride ldTile) to C at c (row stride ldc elements of
/// out.dtype) as out says; `channel0` is the output channel of the tile's first row
/// (channelsAreRows) or first column, for per-channel scales and float biases.
void finishQTile(const int32_t* tile, int64_t ldTile, int64_t rows, int64_t cols,
                 const QTileTerms& terms, const QGemmOutput& out, bool channelsAreRows,
                 int64_t channel0, void* c, int64_t ldc);
/// The same with AVX-512 (16 lanes, masked tails); call only when the CPU has AVX-512.
void finishQTileAvx512(const int32_t* tile, int64_t ldTile, int64_t rows, int64_t cols,
                       const QTileTerms& terms, const QGemmOutput& out, bool channelsAreRows,
                       int64_t channel0, void* c, int64_t ldc);

using QTileFinishFn = decltype(&finishQTile);

}  // namespace kiln::cpu
