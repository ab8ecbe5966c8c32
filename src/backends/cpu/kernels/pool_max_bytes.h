// MaxPool over uint8 / int8 planes on AVX-512, for pool.cpp: each output row is the elementwise
// maximum of its window's input rows (64 bytes at a time), written into a row buffer whose
// padding holds the lowest value, so that every column window then takes the maximum of its taps
// without bounds (64 outputs per step at stride 1, 32 at stride 2, one at a time otherwise). int8
// is pooled as uint8 with the sign bit flipped (x ^ 0x80 orders as x does). pool.cpp keeps the
// generic code where a column window lies entirely in padding (its output is 0, not the lowest).
#pragma once
#include <cstdint>

namespace kiln::cpu {

/// The windows of a MaxPool over planes of n2-byte rows, in plain integers and arrays (the
/// AVX-512 file calls no inline code that other files share).
struct BytePoolRows {
  const int64_t* rowBegin = nullptr;  // output row r pools input rows rowList[rowBegin[r]..[r+1])
  const int64_t* rowList = nullptr;   // input row indices within a plane
  int64_t outRows = 0;                // output rows per plane (the product of the other out dims)
  int64_t in2 = 0, out2 = 0;          // row lengths
  int64_t inPlane = 0, outPlane = 0;  // plane sizes
  int64_t padBegin = 0, kernel = 1, dilation = 1, stride = 1;  // along the rows
  bool isSigned = false;                                       // int8 (else uint8)
  /// Bytes of the row buffer: the padded row and 64 bytes that vector loads may read past it.
  int64_t bufferLength() const;
};

/// Pools planes [pBegin, pEnd) of x into y; `buffer` holds g.bufferLength() bytes.
void maxPoolBytesAvx512(const BytePoolRows& g, const uint8_t* x, uint8_t* y, int64_t pBegin,
                        int64_t pEnd, uint8_t* buffer);

}  // namespace kiln::cpu
