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
                             const uint8_t* weights, int32_t* tile, int64_t rows);

}  // namespace kiln::cpu
