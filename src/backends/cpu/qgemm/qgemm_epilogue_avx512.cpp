// qgemm_epilogue.cpp's finishQTile with 16 int32 lanes, masked at the tile's last columns: the
// epilogue of the AVX512-VNNI kernel, whose tiles are 32 columns wide. The same arithmetic in
// the same order (qgemm_epilogue.cpp explains it), so both give the same bits.
#include <immintrin.h>

#include "backends/cpu/qgemm/qgemm_epilogue.h"

namespace kiln::cpu {
namespace {

// The terms of one row. Copies, not references: the output is bytes, which may alias anything,
// so through a reference every field would be read again after every store.
struct RowTerms16 {
  __m512i add, p, q;
  const int32_t* colAdd;
  const int32_t* colP;
  const int32_t* colQ;
  RowTerms16(const QTileTerms& terms, int64_t i)
      : add(_mm512_set1_epi32(terms.rowAdd ? terms.rowAdd[i] : 0)),
        p(_mm512_set1_epi32(terms.rowP ? terms.rowP[i] : 0)),
        q(_mm512_set1_epi32(terms.rowQ ? terms.rowQ[i] : 0)),
        colAdd(terms.colAdd),
        colP(terms.rowP ? terms.colP : nullptr),
        colQ(terms.rowQ ? terms.colQ : nullptr) {}
  __m512i apply(__m512i acc, int64_t j, __mmask16 m) const {
    __m512i v = _mm512_add_epi32(acc, add);
    if (colAdd) v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(m, colAdd + j));
    if (colP) v = _mm512_add_epi32(v, _mm512_mullo_epi32(p, _mm512_maskz_loadu_epi32(m, colP + j)));
    if (colQ) v = _mm512_add_epi32(v, _mm512_mullo_epi32(q, _mm512_maskz_loadu_epi32(m, colQ + j)));
    return v;
  }
};

inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace

void finishQTileAvx512(const int32_t* tile, int64_t ldTile, int64_t rows, int64_t cols,
                       const QTileTerms& terms, const QGemmOutput& out, bool channelsAreRows,
                       int64_t channel0, void* c, int64_t ldc) {
  const bool perChannel = out.scaleCount > 1;
  const bool quantized = out.dtype == DataType::kUint8 || out.dtype == DataType::kInt8;
  const bool int32 = !quantized && out.dtype != DataType::kFloat32;
  const __m512 qlo = _mm512_set1_ps(static_cast<float>(out.lowest - out.zeroPoint));
  const __m512 qhi = _mm512_set1_ps(static_cast<float>(out.highest - out.zeroPoint));
  const __m512 flo = _mm512_set1_ps(out.floatLowest), fhi = _mm512_set1_ps(out.floatHighest);
  const __m512i zp = _mm512_set1_epi32(out.zeroPoint);
  for (int64_t i = 0; i < rows; ++i) {
    const RowTerms16 row(terms, i);
    const int32_t* acc = tile + i * ldTile;
    const int64_t rowChannel = channelsAreRows ? channel0 + i : channel0;
    const bool scalePerColumn = perChannel && !channelsAreRows;
    const float* scale = out.scale ? out.scale + (perChannel ? rowChannel : 0) : nullptr;
    const float* bias = out.floatBias ? out.floatBias + rowChannel : nullptr;
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = lanes(cols - j);
      const __m512i v = row.apply(_mm512_maskz_loadu_epi32(m, acc + j), j, m);
      if (int32) {
        _mm512_mask_storeu_epi32(static_cast<int32_t*>(c) + i * ldc + j, m, v);
        continue;
      }
      const __m512 s =
          scalePerColumn ? _mm512_maskz_loadu_ps(m, scale + j) : _mm512_set1_ps(scale[0]);
      if (!quantized) {
        const __m512 b = !bias             ? _mm512_setzero_ps()
                         : channelsAreRows ? _mm512_set1_ps(bias[0])
                                           : _mm512_maskz_loadu_ps(m, bias + j);
        const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), s, b);
        _mm512_mask_storeu_ps(static_cast<float*>(c) + i * ldc + j, m,
                              _mm512_min_ps(_mm512_max_ps(f, flo), fhi));
        continue;
      }
      const __m512 f =
          _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), s), qlo), qhi);
      _mm512_mask_cvtepi32_storeu_epi8(static_cast<uint8_t*>(c) + i * ldc + j, m,
                                       _mm512_add_epi32(_mm512_cvtps_epi32(f), zp));
    }
  }
}

}  // namespace kiln::cpu
