// The 8-bit GEMM epilogue, vectorized along a tile's rows with AVX2 (8 int32 at a time) and a
// scalar tail that computes exactly the same: requantization is float(v) * multiplier in float32,
// clamped to [lowest - zp, highest - zp] (integers, so clamping before rounding equals clamping
// after), rounded half to even (vcvtps2dq in the default rounding mode) and + zp, as ONNX
// Runtime's MLAS requantizes. A float output is fma(float(v), scale, bias): one rounding, on
// every path.
#include "backends/cpu/qgemm/qgemm_epilogue.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace kiln::cpu {
namespace {

inline int32_t wrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t wrapMul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// The corrected int32 of row i: 8 lanes from column j, or one. Copies, not references: the
// output is bytes, which may alias anything, so a reference's fields would be read again after
// every store.
struct RowTerms {
  int32_t add = 0, p = 0, q = 0;
  const int32_t* colAdd;
  const int32_t* colP;
  const int32_t* colQ;
  RowTerms(const QTileTerms& terms, int64_t i)
      : colAdd(terms.colAdd),
        colP(terms.rowP ? terms.colP : nullptr),
        colQ(terms.rowQ ? terms.colQ : nullptr) {
    if (terms.rowAdd) add = terms.rowAdd[i];
    if (terms.rowP) p = terms.rowP[i];
    if (terms.rowQ) q = terms.rowQ[i];
  }
  int32_t scalar(int32_t acc, int64_t j) const {
    int32_t v = wrapAdd(acc, add);
    if (colAdd) v = wrapAdd(v, colAdd[j]);
    if (colP) v = wrapAdd(v, wrapMul(p, colP[j]));
    if (colQ) v = wrapAdd(v, wrapMul(q, colQ[j]));
    return v;
  }
  __m256i vector(__m256i acc, int64_t j) const {
    __m256i v = _mm256_add_epi32(acc, _mm256_set1_epi32(add));
    if (colAdd)
      v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colAdd + j)));
    if (colP) {
      const __m256i cp = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colP + j));
      v = _mm256_add_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(p), cp));
    }
    if (colQ) {
      const __m256i cq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(colQ + j));
      v = _mm256_add_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(q), cq));
    }
    return v;
  }
};

// Packs 8 int32 (already within the output type's range) into 8 bytes.
inline void storeBytes8(__m256i v, void* dst) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i words = _mm_packs_epi32(lo, hi);  // exact: |v| <= 255
  const __m128i bytes =
      _mm_packus_epi16(_mm_and_si128(words, _mm_set1_epi16(0xff)), _mm_setzero_si128());
  _mm_storel_epi64(static_cast<__m128i*>(dst), bytes);
}

template <typename Q>
void finishQuantizedRow(const int32_t* acc, int64_t cols, const RowTerms row,
                        const QGemmOutput& out, const float* scale, bool scalePerColumn, Q* dst) {
  const int32_t zeroPoint = out.zeroPoint;
  const float lo = static_cast<float>(out.lowest - zeroPoint),
              hi = static_cast<float>(out.highest - zeroPoint);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i zp = _mm256_set1_epi32(zeroPoint);
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256i v = row.vector(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), j);
    const __m256 s = scalePerColumn ? _mm256_loadu_ps(scale + j) : _mm256_set1_ps(scale[0]);
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), s);
    f = _mm256_min_ps(_mm256_max_ps(f, vlo), vhi);
    storeBytes8(_mm256_add_epi32(_mm256_cvtps_epi32(f), zp), dst + j);
  }
  for (; j < cols; ++j) {
    const float f = static_cast<float>(row.scalar(acc[j], j)) * scale[scalePerColumn ? j : 0];
    dst[j] =
        static_cast<Q>(static_cast<int32_t>(std::nearbyint(std::clamp(f, lo, hi))) + zeroPoint);
  }
}

void finishFloatRow(const int32_t* acc, int64_t cols, const RowTerms& row, const QGemmOutput& out,
                    const float* scale, bool scalePerColumn, const float* bias, bool biasPerColumn,
                    float* dst) {
  const __m256 vlo = _mm256_set1_ps(out.floatLowest), vhi = _mm256_set1_ps(out.floatHighest);
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256i v = row.vector(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), j);
    const __m256 s = scalePerColumn ? _mm256_loadu_ps(scale + j) : _mm256_set1_ps(scale[0]);
    const __m256 b = !bias           ? _mm256_setzero_ps()
                     : biasPerColumn ? _mm256_loadu_ps(bias + j)
                                     : _mm256_set1_ps(bias[0]);
    const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), s, b);
    _mm256_storeu_ps(dst + j, _mm256_min_ps(_mm256_max_ps(f, vlo), vhi));
  }
  for (; j < cols; ++j) {
    const float f =
        std::fma(static_cast<float>(row.scalar(acc[j], j)), scale[scalePerColumn ? j : 0],
                 bias ? bias[biasPerColumn ? j : 0] : 0.0f);
    dst[j] = std::min(std::max(f, out.floatLowest), out.floatHighest);
  }
}

void finishInt32Row(const int32_t* acc, int64_t cols, const RowTerms& row, int32_t* dst) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256i v = row.vector(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), j);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), v);
  }
  for (; j < cols; ++j) dst[j] = row.scalar(acc[j], j);
}

}  // namespace

void finishQTile(const int32_t* tile, int64_t ldTile, int64_t rows, int64_t cols,
                 const QTileTerms& terms, const QGemmOutput& out, bool channelsAreRows,
                 int64_t channel0, void* c, int64_t ldc) {
  const bool perChannel = out.scaleCount > 1;
  for (int64_t i = 0; i < rows; ++i) {
    const RowTerms row(terms, i);
    const int32_t* acc = tile + i * ldTile;
    // The scale (and float bias) of this row: per row, per column from channel0 on, or one.
    const int64_t rowChannel = channelsAreRows ? channel0 + i : channel0;
    const bool perColumn = perChannel && !channelsAreRows;
    const float* scale = out.scale ? out.scale + (perChannel ? rowChannel : 0) : nullptr;
    switch (out.dtype) {
      case DataType::kUint8:
        finishQuantizedRow(acc, cols, row, out, scale, perColumn,
                           static_cast<uint8_t*>(c) + i * ldc);
        break;
      case DataType::kInt8:
        finishQuantizedRow(acc, cols, row, out, scale, perColumn,
                           static_cast<int8_t*>(c) + i * ldc);
        break;
      case DataType::kFloat32: {
        const float* bias = out.floatBias ? out.floatBias + rowChannel : nullptr;
        finishFloatRow(acc, cols, row, out, scale, perColumn, bias, !channelsAreRows,
                       static_cast<float*>(c) + i * ldc);
        break;
      }
      default:
        finishInt32Row(acc, cols, row, static_cast<int32_t*>(c) + i * ldc);
    }
  }
}

}  // namespace kiln::cpu
