// The channels-last sums of kiln::QLinearGlobalAveragePool (qlinear_elementwise.cpp), vectorized:
// each value dequantized as Quantization::dequantize does (in double, rounded to float), summed in
// double, which is exact (qlinear_elementwise.cpp says why), so in any order the same doubles.
#pragma once
#include <cstdint>

namespace kiln::cpu {

/// sums[c] = sum over pixels p of float((x[p * stride + c] - zeroPoint) * scale), for c <
/// channels; x holds int8 values when `isSigned`. AVX-512; sixteen channels at a time.
void sumDequantizedChannelsAvx512(const uint8_t* x, bool isSigned, int64_t pixels, int64_t stride,
                                  int64_t channels, double scale, double zeroPoint, double* sums);

}  // namespace kiln::cpu
