// The micro-kernel of the direct NHWC convolution (qconv_nhwc.cpp). Internal to the qgemm folder.
#pragma once
#include <cstdint>

namespace kiln::cpu {

constexpr int64_t kQConvNhwcRows = 8, kQConvNhwcCols = 32;

/// tile[8 x 32] (row stride 32) = for each row i < rows, sum over taps t and groups g of 4
/// channels of the u8 bytes table[t * 8 + i][4g .. 4g + 3] times the s8 weights strip, which
/// holds taps * cGroups groups of 32 lanes of 4 bytes (qgemm_kernels.h's right-operand layout).
/// Rows at or past `rows` are not computed. Call only when the CPU has AVX512-VNNI.
void qconvNhwcTileAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                             const uint8_t* weights, int32_t* tile, int64_t rows, int64_t cols);

/// An 8-bit output requantized in registers, with finishQTileAvx512's arithmetic for a tile
/// whose only term is one per column: y[i][j] = round_half_even(clamp(float(v + add[j]) *
/// scale[j], lo, hi)) + zeroPoint, bytes at y + i * ldy + j for j < cols.
struct QConvNhwcRequant {
  const int32_t* add = nullptr;  // the tile's columns' terms
  const float* scale = nullptr;  // the tile's columns' scales, or one value
  bool perColumn = false;
  float lo = 0, hi = 0;  // the output's bounds minus its zero point
  int32_t zeroPoint = 0;
  uint8_t* y = nullptr;
  int64_t ldy = 0, cols = 0;
};

/// The same tile written as requantized bytes, without the int32 tile: what small-K layers
/// (1x1 convolutions of 16 to 64 channels) need, whose tiles take fewer cycles than a pass over
/// the int32 tile.
void qconvNhwcTileRequantAvx512Vnni(int64_t taps, int64_t cGroups, const uint8_t* const* table,
                                    const uint8_t* weights, int64_t rows,
                                    const QConvNhwcRequant& out);

}  // namespace kiln::cpu
