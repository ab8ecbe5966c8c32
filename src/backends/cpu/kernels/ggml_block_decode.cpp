// GGML block layouts, as ggml-common.h defines them (all little-endian; d is a float16 scale):
//   Q4_0   (32 values, 18 bytes)  d, 16 bytes of nibbles: value j the low nibble of byte j,
//                                 value j + 16 its high nibble; x = (q - 8) * d
//   Q5_0   (32, 22)               d, a 32-bit word of fifth bits (bit j for value j), nibbles as
//                                 Q4_0; x = (q - 16) * d
//   Q8_0   (32, 34)               d, 32 int8 quants; x = q * d
//   IQ4_NL (32, 18)               d, nibbles as Q4_0 indexing a fixed 16-value table; x = d * t[q]
//   Q5_K   (256, 176)             d, dmin, 12 bytes of eight 6-bit scales and mins, 32 bytes of
//                                 fifth bits, 128 bytes of nibbles: each 64 values use 32 nibble
//                                 bytes (low nibbles then high) and two bits of every high byte;
//                                 x = (d * scale) * q - dmin * min
//   Q6_K   (256, 210)             128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8
//                                 scales, d; x = d * scale * (q - 32), in two halves of 128
//   IQ4_XS (256, 136)             d, 16 bits of 2-bit high scales, 4 bytes of 4-bit low scales,
//                                 128 bytes of nibbles, eight sub-blocks of 32 laid out as IQ4_NL;
//                                 x = (d * (scale - 32)) * t[q]
#include "backends/cpu/kernels/ggml_block_decode.h"

#include <cstring>

#include "core/half.h"

namespace kiln::cpu {
namespace {

using ir::GgmlType;

// IQ4_NL's and IQ4_XS's non-linear 4-bit levels.
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

float halfAt(const uint8_t* p) {
  return halfBitsToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

void decodeQ4_0(const uint8_t* b, float* y) {
  const float d = halfAt(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

void decodeQ5_0(const uint8_t* b, float* y) {
  const float d = halfAt(b);
  uint32_t high;
  std::memcpy(&high, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | (((high >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | (((high >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}

void decodeQ8_0(const uint8_t* b, float* y) {
  const float d = halfAt(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// 32 values of 16 nibble bytes mapped through the IQ4 levels and scaled by d.
void decodeIq4Nibbles(const uint8_t* qs, float d, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4Levels[qs[j] & 0xF];
    y[j + 16] = d * kIq4Levels[qs[j] >> 4];
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a K super-block's 12 scale bytes: the first
// four in the low six bits of bytes 0-3 (scales) and 4-7 (mins), the last four split between the
// nibbles of bytes 8-11 and the top two bits of bytes 0-7.
void scaleMinK4(int j, const uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void decodeQ5_K(const uint8_t* b, float* y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  for (int group = 0; group < 4; ++group, ql += 32, y += 64) {
    for (int half = 0; half < 2; ++half) {
      int scale, min;
      scaleMinK4(2 * group + half, scales, scale, min);
      const float ds = d * static_cast<float>(scale), dm = dmin * static_cast<float>(min);
      const int bit = 2 * group + half, shift = 4 * half;
      for (int l = 0; l < 32; ++l) {
        const int q = ((ql[l] >> shift) & 0xF) | (((qh[l] >> bit) & 1) << 4);
        // ds * q is exact (an 11-bit float16 times a 6-bit then a 5-bit integer), so only the
        // subtraction rounds, fused into an FMA or not.
        y[32 * half + l] = ds * static_cast<float>(q) - dm;
      }
    }
  }
}

void decodeQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = halfAt(b + 208);
  for (int part = 0; part < 2; ++part, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      // The four values of column l: 32 apart, nibbles of ql[l] / ql[l + 32], 2-bit highs of qh[l].
      const int q[4] = {
          (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
      for (int r = 0; r < 4; ++r)
        y[l + 32 * r] = d * static_cast<float>(sc[s + 2 * r]) * static_cast<float>(q[r] - 32);
    }
  }
}

void decodeIq4Xs(const uint8_t* b, float* y) {
  const float d = halfAt(b);
  const int highScales = b[2] | (b[3] << 8);
  const uint8_t* lowScales = b + 4;
  const uint8_t* qs = b + 8;
  for (int sub = 0; sub < 8; ++sub, qs += 16, y += 32) {
    const int scale =
        ((lowScales[sub / 2] >> (4 * (sub % 2))) & 0xF) | (((highScales >> (2 * sub)) & 3) << 4);
    decodeIq4Nibbles(qs, d * static_cast<float>(scale - 32), y);
  }
}

}  // namespace

void decodeGgmlRow(GgmlType format, const uint8_t* row, int64_t values, float* out) {
  switch (format) {
    case GgmlType::kF32:
      std::memcpy(out, row, static_cast<size_t>(values) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < values; ++i) out[i] = halfAt(row + 2 * i);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < values; ++i)
        out[i] = bfloat16BitsToFloat(static_cast<uint16_t>(row[2 * i] | (row[2 * i + 1] << 8)));
      return;
    default:
      break;
  }
  const ir::GgmlFormat& f = *ir::findGgmlFormat(static_cast<int64_t>(format));
  void (*decodeBlock)(const uint8_t*, float*) = nullptr;
  switch (format) {
    case GgmlType::kQ4_0:
      decodeBlock = decodeQ4_0;
      break;
    case GgmlType::kQ5_0:
      decodeBlock = decodeQ5_0;
      break;
    case GgmlType::kQ8_0:
      decodeBlock = decodeQ8_0;
      break;
    case GgmlType::kIQ4_NL:
      decodeBlock = [](const uint8_t* b, float* y) { decodeIq4Nibbles(b + 2, halfAt(b), y); };
      break;
    case GgmlType::kQ5_K:
      decodeBlock = decodeQ5_K;
      break;
    case GgmlType::kQ6_K:
      decodeBlock = decodeQ6_K;
      break;
    case GgmlType::kIQ4_XS:
      decodeBlock = decodeIq4Xs;
      break;
    default:
      return;  // the shape rule refused the formats without a decoder
  }
  for (int64_t v = 0; v < values; v += f.blockValues, row += f.blockBytes, out += f.blockValues)
    decodeBlock(row, out);
}

}  // namespace kiln::cpu
