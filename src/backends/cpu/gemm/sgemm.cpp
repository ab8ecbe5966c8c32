// Cache-blocked SGEMM in the Goto/BLIS style: a kc x nc panel of op(B) is packed into nr-column
// strips (kept in L2), an mc x kc block of alpha*op(A) into mr-row strips, and the ISA's
// micro-kernel multiplies one A strip (kept in L1: it is the broadcast side, the smaller one) by
// each B strip in turn (streamed from L2). Constant operands come packed whole (PackedMatrix) in
// the same strip layout, one kc block after another.
#include "backends/cpu/gemm/sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <new>

#include "backends/cpu/gemm/sgemm_kernels.h"
#include "backends/cpu/gemm/sgemv.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

int64_t roundUp(int64_t n, int64_t step) { return (n + step - 1) / step * step; }

// Transposes the 8x8 block in r[0..7] (row i of the block in r[i]) in place.
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Stores the first `lanes` floats of v with plain 16/8/4-byte stores (masked stores are slow on
// some AVX2 CPUs).
inline void storeLanes(float* out, __m256 v, int64_t lanes) {
  if (lanes == 8) return _mm256_storeu_ps(out, v);
  __m128 part = _mm256_castps256_ps128(v);
  if (lanes >= 4) {
    _mm_storeu_ps(out, part);
    part = _mm256_extractf128_ps(v, 1);
    out += 4;
    lanes -= 4;
  }
  if (lanes >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(out), part);
    part = _mm_movehl_ps(part, part);
    out += 2;
    lanes -= 2;
  }
  if (lanes == 1) _mm_store_ss(out, part);
}

// One strip of `rows` rows (the rest of mr zero) from row-major A (rows at src, stride lda):
// 8 rows x 8 depths at a time are loaded along the rows and transposed into k-major order.
void packARowMajorStrip(int64_t mr, int64_t rows, const float* src, int64_t lda, int64_t kc,
                        float alpha, float* dst) {
  const __m256 scale = _mm256_set1_ps(alpha);
  for (int64_t g = 0; g < mr; g += 8) {
    const int64_t lanes = std::min<int64_t>(8, mr - g);
    const int64_t valid = std::clamp<int64_t>(rows - g, 0, 8);
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      __m256 r[8];
      for (int64_t i = 0; i < 8; ++i) {
        r[i] = i < valid ? _mm256_mul_ps(scale, _mm256_loadu_ps(src + (g + i) * lda + k))
                         : _mm256_setzero_ps();
      }
      transpose8x8(r);
      for (int64_t t = 0; t < 8; ++t) {
        float* out = dst + (k + t) * mr + g;
        storeLanes(out, r[t], lanes);
      }
    }
    for (; k < kc; ++k) {
      for (int64_t i = 0; i < lanes; ++i)
        dst[k * mr + g + i] = i < valid ? alpha * src[(g + i) * lda + k] : 0.0f;
    }
  }
}

// Rows in the A strip that starts `remaining` rows before the end of its block: mr, except that
// a remainder of under mr/2 rows is merged with the strip before it and the two split evenly
// (128 rows with mr 14: eight strips of 14, then 8 + 8 rather than 14 + 2), when `balance`: a
// tile of few rows has too few accumulators to hide the FMA latency. A PackedMatrix keeps whole
// strips (its layout addresses strip n at row n * mr).
int64_t stripRows(int64_t mr, int64_t remaining, bool balance) {
  if (balance && remaining > mr && remaining - mr < mr / 2) return (remaining + 1) / 2;
  return std::min(mr, remaining);
}

// Packs rows [i0, i0+mc) x depth [k0, k0+kc) of alpha*op(A) into the kernel's strips (stripRows),
// strip n at dst + n * mr * kc, each stored k-major (mr values per k), zero-padded to mr rows.
void packAStrips(const SgemmKernelInfo& ki, bool transA, const float* A, int64_t lda, int64_t i0,
                 int64_t mc, int64_t k0, int64_t kc, float alpha, float* dst, bool balance) {
  const int64_t mr = ki.mr;
  for (int64_t s = 0, rows = 0; s < mc; s += rows) {
    rows = stripRows(mr, mc - s, balance);
    const float* src = transA ? A + k0 * lda + i0 + s : A + (i0 + s) * lda + k0;
    if (ki.packA) {
      ki.packA(rows, transA, src, lda, kc, alpha, dst);
    } else if (transA) {
      for (int64_t k = 0; k < kc; ++k) {
        int64_t r = 0;
        for (; r < rows; ++r) dst[k * mr + r] = alpha * src[k * lda + r];
        for (; r < mr; ++r) dst[k * mr + r] = 0.0f;
      }
    } else {
      packARowMajorStrip(mr, rows, src, lda, kc, alpha, dst);
    }
    dst += kc * mr;
  }
}

// Packs depth [k0, k0+kc) x columns [j0, j0+nc) of alpha*op(B) into nr-column strips, each
// stored k-major (nr values per k), zero-padding the last strip.
void packBStrips(int64_t nr, bool transB, const float* B, int64_t ldb, int64_t k0, int64_t kc,
                 int64_t j0, int64_t nc, float alpha, float* dst) {
  if (!transB) {
    // Row by row, each source row read once from left to right (strip by strip, every access
    // would be a new page, which the hardware prefetchers do not follow), scattered to the strips.
    const __m256 scale = _mm256_set1_ps(alpha);
    const int64_t full = nc / nr * nr;
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = B + (k0 + k) * ldb + j0;
      float* out = dst + k * nr;
      int64_t s = 0;
      for (; s < full; s += nr, out += kc * nr) {
        for (int64_t c = 0; c < nr; c += 8) {
          _mm256_storeu_ps(out + c, _mm256_mul_ps(scale, _mm256_loadu_ps(src + s + c)));
        }
      }
      if (s < nc) {
        const int64_t cols = nc - s;
        for (int64_t c = 0; c < cols; ++c) out[c] = alpha * src[s + c];
        std::fill(out + cols, out + nr, 0.0f);
      }
    }
    return;
  }
  for (int64_t s = 0; s < nc; s += nr) {
    const int64_t cols = std::min(nr, nc - s);
    // op(B)(k, j) = B[j * ldb + k]: walk each source row contiguously, scatter by nr.
    for (int64_t c = 0; c < nr; ++c) {
      if (c < cols) {
        const float* src = B + (j0 + s + c) * ldb + k0;
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + c] = alpha * src[k];
      } else {
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + c] = 0.0f;
      }
    }
    dst += kc * nr;
  }
}

// One GEMM operand: a plain matrix, or a whole-matrix packing (strips of the kernel's mr or nr,
// kc blocks one after another: the block at depth k0 starts at packed + k0 * padded).
struct Operand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const float* packed = nullptr;
  const uint16_t* half = nullptr;  // B only: the packing in half precision (PackedHalfMatrix)
  int64_t padded = 0;  // rows (A) or columns (B) of the packing, rounded up to whole strips
  int64_t offset =
      0;  // first row (A) or column (B) of this view, a multiple of mr (nr) when packed

  // The view starting `n` rows (A) or columns (B) further on.
  Operand shifted(int64_t n, bool isA) const {
    Operand o = *this;
    if (packed || half) {
      o.offset += n;
    } else {
      const bool alongRows = isA ? !trans : trans;  // rows of op(A) are rows of A unless transposed
      o.data += alongRows ? n * ld : n;
    }
    return o;
  }
  // The strip holding row (A) or column (B) `first` of the view, in the packed block at depth k0.
  const float* packedStrip(int64_t k0, int64_t kc, int64_t first) const {
    return packed + k0 * padded + (offset + first) * kc;
  }
  const uint16_t* halfStrip(int64_t k0, int64_t kc, int64_t first) const {
    return half + k0 * padded + (offset + first) * kc;
  }
};

// Widens `count` half values to float32 times alpha (exact for alpha 1).
void widenHalves(const uint16_t* src, int64_t count, float alpha, float* dst) {
  const __m256 scale = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, alpha == 1.0f ? v : _mm256_mul_ps(v, scale));
  }
  for (; i < count; ++i) dst[i] = alpha * halfBitsToFloat(src[i]);
}

struct Problem {
  const SgemmKernelInfo* ki;
  int64_t M, N, K;
  float alpha;
  Operand a, b;
  float beta;  // only 0 (C not read) or 1 (accumulate) here: other betas are applied first
  float* C;
  int64_t ldc;
  const GemmEpilogue* ep;      // nullptr for none
  int64_t row0 = 0, col0 = 0;  // where this block of C sits in the whole C (epilogue indexing)
};

// The A side of the loop nest for one kc x nc panel of op(B): C[:, j0:j0+nc] (+)= op(A)[:,
// k0:k0+kc] times the panel, whose strip for column js of the panel is bStrip(js); the epilogue
// follows the last depth block. A is packed mc rows at a time into packedA unless it comes
// pre-packed.
template <typename BStripFn>
void multiplyPanel(const Problem& p, float* packedA, int64_t j0, int64_t nc, int64_t k0, int64_t kc,
                   BStripFn bStrip) {
  const SgemmKernelInfo& ki = *p.ki;
  const int64_t mr = ki.mr, nr = ki.nr;
  const bool accumulate = k0 > 0 || p.beta != 0.0f;
  const bool lastK = k0 + kc == p.K;
  // A packed here gets balanced strips (stripRows); a pre-packed A has whole ones.
  const bool balance = !p.a.packed;
  // An epilogue that calls activation.h row by row (Gelu, Sigmoid, ...) runs once per A strip
  // over the panel's width when the strip stays in L1: per 32-column tile, the calls would cost
  // as much as the activation.
  const GemmEpilogue* ep = lastK ? p.ep : nullptr;
  const bool epiloguePerStrip = ep && ki.aStripInL1 && !gemmEpilogueIsInline(*ep);
  const SgemmMicroKernelFn kernel =
      p.b.packed && ki.kernelPrepackedB ? ki.kernelPrepackedB : ki.kernel;
  for (int64_t i0 = 0; i0 < p.M; i0 += ki.mc) {
    const int64_t mc = std::min(ki.mc, p.M - i0);
    if (!p.a.packed)
      packAStrips(ki, p.a.trans, p.a.data, p.a.ld, i0, mc, k0, kc, p.alpha, packedA, balance);
    // Strip n starts at row `is` of the block and has `rows` rows.
    auto tile = [&](int64_t n, int64_t is, int64_t rows, int64_t js) {
      const float* aStrip = p.a.packed ? p.a.packedStrip(k0, kc, i0 + is) : packedA + n * mr * kc;
      const int64_t cols = std::min(nr, nc - js);
      float* c = p.C + (i0 + is) * p.ldc + j0 + js;
      kernel(kc, aStrip, bStrip(js), c, p.ldc, rows, cols, accumulate);
      if (ep && !epiloguePerStrip)
        applyGemmEpilogue(*ep, c, p.ldc, rows, cols, p.row0 + i0 + is, p.col0 + j0 + js);
    };
    if (ki.aStripInL1) {
      for (int64_t is = 0, n = 0, rows = 0; is < mc; is += rows, ++n) {
        rows = stripRows(mr, mc - is, balance);
        for (int64_t js = 0; js < nc; js += nr) tile(n, is, rows, js);
        if (epiloguePerStrip) {
          applyGemmEpilogue(*ep, p.C + (i0 + is) * p.ldc + j0, p.ldc, rows, nc, p.row0 + i0 + is,
                            p.col0 + j0);
        }
      }
    } else {
      for (int64_t js = 0; js < nc; js += nr) {
        for (int64_t is = 0, n = 0, rows = 0; is < mc; is += rows, ++n) {
          rows = stripRows(mr, mc - is, balance);
          tile(n, is, rows, js);
        }
      }
    }
  }
}

// Floats rounded up to whole cache lines, so that each scratch buffer starts 64-byte aligned.
int64_t lineFloats(int64_t floats) { return roundUp(floats, 16); }

// The scratch of one thread's blockedGemm: an mc x kc block of A (unless A comes packed), then a
// kc x nc panel of B (unless B comes packed), for a product of at most M x N x K.
int64_t aBlockFloats(const SgemmKernelInfo& ki, int64_t M, int64_t K) {
  return lineFloats(std::min(ki.mc, roundUp(M, ki.mr)) * std::min(ki.kc, K));
}
int64_t bPanelFloats(const SgemmKernelInfo& ki, int64_t N, int64_t K) {
  return lineFloats(std::min(ki.nc, roundUp(N, ki.nr)) * std::min(ki.kc, K));
}

// The single-threaded Goto loop nest over one block of C, packing into `scratch` (the A block at
// its start, then the B panel: slotFloats of Layout).
void blockedGemm(const Problem& p, float* scratch) {
  const SgemmKernelInfo& ki = *p.ki;
  const int64_t nr = ki.nr;
  float* packedA = p.a.packed ? nullptr : scratch;
  float* packedB = p.b.packed ? nullptr : scratch + (p.a.packed ? 0 : aBlockFloats(ki, p.M, p.K));
  // A packed on the fly carries alpha; with A pre-packed, B does.
  const float alphaB = p.a.packed ? p.alpha : 1.0f;
  for (int64_t j0 = 0; j0 < p.N; j0 += ki.nc) {
    const int64_t nc = std::min(ki.nc, p.N - j0);
    for (int64_t k0 = 0; k0 < p.K; k0 += ki.kc) {
      const int64_t kc = std::min(ki.kc, p.K - k0);
      if (p.b.packed) {
        multiplyPanel(p, packedA, j0, nc, k0, kc,
                      [&](int64_t js) { return p.b.packedStrip(k0, kc, j0 + js); });
      } else if (p.b.half) {  // the panel's strips are contiguous in the packing
        widenHalves(p.b.halfStrip(k0, kc, j0), roundUp(nc, nr) * kc, alphaB, packedB);
        multiplyPanel(p, packedA, j0, nc, k0, kc, [&](int64_t js) { return packedB + js * kc; });
      } else {
        packBStrips(nr, p.b.trans, p.b.data, p.b.ld, k0, kc, j0, nc, alphaB, packedB);
        multiplyPanel(p, packedA, j0, nc, k0, kc, [&](int64_t js) { return packedB + js * kc; });
      }
    }
  }
}

void scaleC(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.0f) {
      std::fill(row, row + N, 0.0f);
    } else {
      for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
  }
}

constexpr int64_t kMinParallelWork = int64_t{1} << 18;  // M*N*K below which one thread is faster

// op(B) up to this many floats (padded) is packed whole for a row split (sharedPackedBGemm): 4 MiB.
constexpr int64_t kMaxSharedPackedB = int64_t{1} << 20;

// How a product is split over the threads, and the scratch that takes: `parts` slots of
// slotFloats (each part's own A block and B panel), after sharedFloats of B packing they share.
struct Layout {
  enum class Split {
    kSerial,         // one thread, blockedGemm
    kColumns,        // C split by column tiles, each part packs its own B
    kRows,           // C split by row tiles, each part packs its own A (and B unless pre-packed)
    kSharedPackedB,  // both plain, C split by rows: all of op(B) packed together, then rows
    kSharedPanel,    // the same with op(B) too large: each kc x nc panel packed together
  };
  Split split = Split::kSerial;
  int64_t parts = 1;
  int64_t slotFloats = 0;
  int64_t sharedFloats = 0;

  int64_t totalFloats() const { return sharedFloats + parts * slotFloats; }
};

// The split runBlocked makes of an M x N x K product (no dimension 0) on `threads` threads. A B
// in half precision (bHalf) is widened panel by panel into each part's own slot.
Layout layoutOf(const SgemmKernelInfo& ki, int64_t M, int64_t N, int64_t K, bool aPacked,
                bool bPacked, int threads, bool bHalf = false) {
  const int64_t mTiles = (M + ki.mr - 1) / ki.mr, nTiles = (N + ki.nr - 1) / ki.nr;
  const int64_t aFloats = aPacked ? 0 : aBlockFloats(ki, M, K);
  const int64_t bFloats = bPacked ? 0 : bPanelFloats(ki, N, K);
  Layout l;
  l.slotFloats = aFloats + bFloats;
  if (threads <= 1 || M * N * K < kMinParallelWork || std::max(mTiles, nTiles) < 2) return l;
  if (!aPacked && !bPacked && !bHalf && mTiles > nTiles) {
    l.slotFloats = aFloats;
    if (roundUp(N, ki.nr) * K <= kMaxSharedPackedB) {
      l.split = Layout::Split::kSharedPackedB;
      l.sharedFloats = lineFloats(roundUp(N, ki.nr) * K);
      l.parts = std::min<int64_t>(threads, M);
    } else {
      l.split = Layout::Split::kSharedPanel;
      l.sharedFloats = bFloats;
      l.parts = std::min<int64_t>(threads, mTiles);
    }
  } else if (nTiles >= mTiles) {
    l.split = Layout::Split::kColumns;
    l.parts = std::min<int64_t>(threads, nTiles);
  } else {
    l.split = Layout::Split::kRows;
    l.parts = std::min<int64_t>(threads, mTiles);
  }
  return l;
}

// The part of p covering rows [i0, i1) of C (i0 a multiple of mr when A is pre-packed).
Problem rowRange(const Problem& p, int64_t i0, int64_t i1) {
  Problem part = p;
  part.M = std::min(p.M, i1) - i0;
  part.a = p.a.shifted(i0, true);
  part.C = p.C + i0 * p.ldc;
  part.row0 = p.row0 + i0;
  return part;
}

// The part of p covering row tiles [t0, t1) of C (whole micro-tiles of mr rows).
Problem rowTiles(const Problem& p, int64_t t0, int64_t t1) {
  return rowRange(p, t0 * p.ki->mr, t1 * p.ki->mr);
}

// The part of p covering column tiles [t0, t1) of C.
Problem columnTiles(const Problem& p, int64_t t0, int64_t t1) {
  Problem part = p;
  const int64_t j0 = t0 * p.ki->nr;
  part.N = std::min(p.N, t1 * p.ki->nr) - j0;
  part.b = p.b.shifted(j0, false);
  part.C = p.C + j0;
  part.col0 = p.col0 + j0;
  return part;
}

// C split over rows with neither operand pre-packed: rather than every thread packing the same
// B panel, the threads pack each kc x nc panel together (a share of its strips each), then each
// multiplies its own rows of A by the whole panel. Two pool rounds per panel.
void sharedPanelGemm(const Problem& p, const Layout& l, float* scratch, ThreadPool& pool) {
  const SgemmKernelInfo& ki = *p.ki;
  const int64_t mr = ki.mr, nr = ki.nr;
  float* panel = scratch;
  float* slots = scratch + l.sharedFloats;
  const int64_t mTiles = (p.M + mr - 1) / mr;
  for (int64_t j0 = 0; j0 < p.N; j0 += ki.nc) {
    const int64_t nc = std::min(ki.nc, p.N - j0);
    const int64_t strips = (nc + nr - 1) / nr;
    for (int64_t k0 = 0; k0 < p.K; k0 += ki.kc) {
      const int64_t kc = std::min(ki.kc, p.K - k0);
      pool.parallelFor(strips, [&](int64_t s0, int64_t s1) {
        const int64_t first = s0 * nr, last = std::min(nc, s1 * nr);
        packBStrips(nr, p.b.trans, p.b.data, p.b.ld, k0, kc, j0 + first, last - first, 1.0f,
                    panel + first * kc);
      });
      forEachThreadPart(mTiles, static_cast<int>(l.parts),
                        [&](int64_t part, int64_t t0, int64_t t1) {
                          multiplyPanel(rowTiles(p, t0, t1), slots + part * l.slotFloats, j0, nc,
                                        k0, kc, [&](int64_t js) { return panel + js * kc; });
                        });
    }
  }
}

// C split over rows with neither operand pre-packed and op(B) small enough: the threads pack all
// of op(B) together (a share of its strips each, in PackedMatrix's layout), then each multiplies
// its own rows by it as by a pre-packed B. Two pool rounds in all, where sharedPanelGemm takes two
// per kc x nc panel: fewer joins, and one thread's stall is not added up panel after panel.
void sharedPackedBGemm(const Problem& p, const Layout& l, float* scratch, ThreadPool& pool) {
  const SgemmKernelInfo& ki = *p.ki;
  const int64_t nr = ki.nr;
  const int64_t padded = roundUp(p.N, nr);
  float* packed = scratch;
  pool.parallelFor(padded / nr, [&](int64_t s0, int64_t s1) {
    const int64_t first = s0 * nr, last = std::min(p.N, s1 * nr);
    for (int64_t k0 = 0; k0 < p.K; k0 += ki.kc) {
      const int64_t kc = std::min(ki.kc, p.K - k0);
      float* dst = packed + k0 * padded + first * kc;
      packBStrips(nr, p.b.trans, p.b.data, p.b.ld, k0, kc, first, last - first, 1.0f, dst);
    }
  });
  Problem q = p;
  q.b = Operand{};
  q.b.packed = packed;
  q.b.padded = padded;
  // A is packed per thread, so the threads' rows need not be whole tiles: equal shares of rows
  // (1024 rows on 2 threads: 512 each, where whole tiles of 14 would give 518 and 506).
  float* slots = scratch + l.sharedFloats;
  forEachThreadPart(p.M, static_cast<int>(l.parts), [&](int64_t part, int64_t i0, int64_t i1) {
    blockedGemm(rowRange(q, i0, i1), slots + part * l.slotFloats);
  });
}

// Applies beta, then runs the split layoutOf chose, packing into `scratch` (the Layout's floats).
void runBlocked(Problem p, float* scratch) {
  if (p.beta != 0.0f && p.beta != 1.0f) {
    scaleC(p.M, p.N, p.beta, p.C, p.ldc);
    p.beta = 1.0f;
  }
  ThreadPool* pool = currentThreadPool();
  const Layout l = layoutOf(*p.ki, p.M, p.N, p.K, p.a.packed != nullptr, p.b.packed != nullptr,
                            poolThreads(), p.b.half != nullptr);
  const int64_t mTiles = (p.M + p.ki->mr - 1) / p.ki->mr, nTiles = (p.N + p.ki->nr - 1) / p.ki->nr;
  const int parts = static_cast<int>(l.parts);
  switch (l.split) {
    case Layout::Split::kSerial:
      return blockedGemm(p, scratch);
    case Layout::Split::kSharedPackedB:
      return sharedPackedBGemm(p, l, scratch, *pool);
    case Layout::Split::kSharedPanel:
      return sharedPanelGemm(p, l, scratch, *pool);
    case Layout::Split::kColumns:
      return forEachThreadPart(nTiles, parts, [&](int64_t part, int64_t t0, int64_t t1) {
        blockedGemm(columnTiles(p, t0, t1), scratch + part * l.slotFloats);
      });
    case Layout::Split::kRows:
      return forEachThreadPart(mTiles, parts, [&](int64_t part, int64_t t0, int64_t t1) {
        blockedGemm(rowTiles(p, t0, t1), scratch + part * l.slotFloats);
      });
  }
}

// The cases with no work for the kernels: C = epilogue(beta * C).
bool handleDegenerate(int64_t M, int64_t N, int64_t K, float alpha, float beta, float* C,
                      int64_t ldc, const GemmEpilogue* ep) {
  if (M <= 0 || N <= 0) return true;
  if (K > 0 && alpha != 0.0f) return false;
  if (beta != 1.0f) scaleC(M, N, beta, C, ldc);
  if (ep) applyGemmEpilogue(*ep, C, ldc, M, N, 0, 0);
  return true;
}

void sgemmImpl(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
               int64_t ldc, float* scratch, const GemmEpilogue* ep) {
  if (handleDegenerate(M, N, K, alpha, beta, C, ldc, ep)) return;
  // Matrix-vector products: packing would cost as much as the arithmetic.
  if (M == 1) {  // row vector times op(B): C^T = op(B)^T a
    detail::sgemv(N, K, alpha, B, ldb, transB, A, transA ? lda : 1, beta, C, 1, ep, true, scratch);
    return;
  }
  if (N == 1) {  // op(A) times a column vector
    detail::sgemv(M, K, alpha, A, lda, !transA, B, transB ? 1 : ldb, beta, C, ldc, ep, false,
                  scratch);
    return;
  }
  Problem p{&sgemmKernelFor(activeCpuIsa()), M,    N, K,   alpha, Operand{A, lda, transA},
            Operand{B, ldb, transB},         beta, C, ldc, ep};
  runBlocked(p, scratch);
}

uint64_t floatBytes(int64_t floats) { return static_cast<uint64_t>(floats) * sizeof(float); }

}  // namespace

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           void* workspace, const GemmEpilogue& epilogue) {
  sgemmImpl(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
            static_cast<float*>(workspace), epilogue.empty() ? nullptr : &epilogue);
}

uint64_t sgemmWorkspaceBytes(int64_t M, int64_t N, int64_t K, int threads) {
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  if (M == 1) return floatBytes(detail::sgemvScratchFloats(N, K));
  if (N == 1) return floatBytes(detail::sgemvScratchFloats(M, K));
  const SgemmKernelInfo& ki = sgemmKernelFor(activeCpuIsa());
  return floatBytes(layoutOf(ki, M, N, K, false, false, threads).totalFloats());
}

uint64_t sgemmWorkspaceBytes(const PackedMatrix& packed, int64_t other, int threads) {
  const bool packedB = packed.side() == PackedMatrix::Side::kB;
  const int64_t M = packedB ? other : packed.rows(), N = packedB ? packed.cols() : other;
  const int64_t K = packedB ? packed.rows() : packed.cols();
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  const SgemmKernelInfo& ki = sgemmKernelFor(packed.isa());
  if (packedB && M == 1) return floatBytes(detail::sgemvScratchFloats(roundUp(N, ki.nr), K));
  return floatBytes(layoutOf(ki, M, N, K, !packedB, packedB, threads).totalFloats());
}

// Packs a whole operand (outer = M rows of op(A), or N columns of op(B), over depth K) strip by
// strip, one kc block after another, as blockedGemm reads a pre-packed operand.
PackedMatrix packWhole(PackedMatrix::Side side, bool trans, int64_t outer, int64_t K,
                       const float* X, int64_t ld, CpuIsa isa) {
  const SgemmKernelInfo& ki = sgemmKernelFor(isa);
  const bool isA = side == PackedMatrix::Side::kA;
  const int64_t strip = isA ? ki.mr : ki.nr;
  const int64_t padded = roundUp(std::max<int64_t>(outer, 1), strip);
  std::shared_ptr<float> storage = allocateSharedFloats(padded * K);
  float* data = storage.get();
  PackedMatrix packed;
  packed.data_ = std::move(storage);
  for (int64_t k0 = 0; k0 < K && outer > 0; k0 += ki.kc) {
    const int64_t kc = std::min(ki.kc, K - k0);
    if (isA) {
      packAStrips(ki, trans, X, ld, 0, outer, k0, kc, 1.0f, data + k0 * padded, false);
    } else {
      packBStrips(strip, trans, X, ld, k0, kc, 0, outer, 1.0f, data + k0 * padded);
    }
  }
  packed.side_ = side;
  packed.isa_ = ki.isa;
  packed.rows_ = isA ? outer : K;
  packed.cols_ = isA ? K : outer;
  packed.floats_ = padded * K;
  return packed;
}

int64_t PackedMatrix::packedFloats(Side side, CpuIsa isa, int64_t rows, int64_t cols) {
  const SgemmKernelInfo& ki = sgemmKernelFor(isa);
  const bool isA = side == Side::kA;
  const int64_t outer = isA ? rows : cols, K = isA ? cols : rows;
  return roundUp(std::max<int64_t>(outer, 1), isA ? ki.mr : ki.nr) * K;
}

PackedMatrix PackedMatrix::view(Side side, CpuIsa isa, int64_t rows, int64_t cols,
                                std::shared_ptr<const float> data) {
  PackedMatrix packed;
  packed.data_ = std::move(data);
  packed.side_ = side;
  packed.isa_ = isa;
  packed.rows_ = rows;
  packed.cols_ = cols;
  packed.floats_ = packedFloats(side, isa, rows, cols);
  return packed;
}

PackedMatrix packA(bool transA, int64_t M, int64_t K, const float* A, int64_t lda, CpuIsa isa) {
  return packWhole(PackedMatrix::Side::kA, transA, M, K, A, lda, isa);
}

PackedMatrix packB(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb, CpuIsa isa) {
  return packWhole(PackedMatrix::Side::kB, transB, N, K, B, ldb, isa);
}

void sgemmPacked(bool transA, int64_t M, float alpha, const float* A, int64_t lda,
                 const PackedMatrix& B, float beta, float* C, int64_t ldc, void* workspace,
                 const GemmEpilogue& epilogue) {
  const int64_t K = B.rows(), N = B.cols();
  const GemmEpilogue* ep = epilogue.empty() ? nullptr : &epilogue;
  if (handleDegenerate(M, N, K, alpha, beta, C, ldc, ep)) return;
  const SgemmKernelInfo& ki = sgemmKernelFor(B.isa());
  if (M == 1) {  // one row (a classifier on one image): stream the packed weights once
    detail::sgemvPacked(ki.isa, N, K, ki.nr, ki.kc, roundUp(N, ki.nr), alpha, A, transA ? lda : 1,
                        B.data(), beta, C, ep, static_cast<float*>(workspace));
    return;
  }
  Operand b;
  b.packed = B.data();
  b.padded = roundUp(N, ki.nr);
  Problem p{&ki, M, N, K, alpha, Operand{A, lda, transA}, b, beta, C, ldc, ep};
  runBlocked(p, static_cast<float*>(workspace));
}

void sgemmPacked(const PackedMatrix& A, int64_t N, float alpha, bool transB, const float* B,
                 int64_t ldb, float beta, float* C, int64_t ldc, void* workspace,
                 const GemmEpilogue& epilogue) {
  const int64_t M = A.rows(), K = A.cols();
  const GemmEpilogue* ep = epilogue.empty() ? nullptr : &epilogue;
  if (handleDegenerate(M, N, K, alpha, beta, C, ldc, ep)) return;
  const SgemmKernelInfo& ki = sgemmKernelFor(A.isa());
  Operand a;
  a.packed = A.data();
  a.padded = roundUp(M, ki.mr);
  Problem p{&ki, M, N, K, alpha, a, Operand{B, ldb, transB}, beta, C, ldc, ep};
  runBlocked(p, static_cast<float*>(workspace));
}

PackedHalfMatrix packBHalf(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb,
                           CpuIsa isa) {
  const PackedMatrix packed = packB(transB, K, N, B, ldb, isa);
  std::shared_ptr<uint16_t> storage(
      static_cast<uint16_t*>(allocateAligned(static_cast<uint64_t>(packed.floats()) * 2 + 64)),
      [](uint16_t* p) { std::free(p); });
  if (!storage) throw std::bad_alloc();  // as packB's allocateSharedFloats
  for (int64_t i = 0; i < packed.floats(); ++i)
    storage.get()[i] = floatToHalfBits(packed.data()[i]);
  PackedHalfMatrix half;
  half.data_ = std::move(storage);
  half.isa_ = packed.isa();
  half.rows_ = K;
  half.cols_ = N;
  half.values_ = packed.floats();
  return half;
}

PackedHalfMatrix PackedHalfMatrix::view(CpuIsa isa, int64_t rows, int64_t cols,
                                        std::shared_ptr<const uint16_t> data) {
  PackedHalfMatrix half;
  half.data_ = std::move(data);
  half.isa_ = isa;
  half.rows_ = rows;
  half.cols_ = cols;
  half.values_ = PackedMatrix::packedFloats(PackedMatrix::Side::kB, isa, rows, cols);
  return half;
}

uint64_t sgemmWorkspaceBytes(const PackedHalfMatrix& packed, int64_t M, int threads) {
  const int64_t N = packed.cols(), K = packed.rows();
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  const SgemmKernelInfo& ki = sgemmKernelFor(packed.isa());
  if (M == 1) return floatBytes(detail::sgemvScratchFloats(roundUp(N, ki.nr), K));
  return floatBytes(layoutOf(ki, M, N, K, false, false, threads, true).totalFloats());
}

void sgemmPackedHalf(bool transA, int64_t M, float alpha, const float* A, int64_t lda,
                     const PackedHalfMatrix& B, float beta, float* C, int64_t ldc, void* workspace,
                     const GemmEpilogue& epilogue) {
  const int64_t K = B.rows(), N = B.cols();
  const GemmEpilogue* ep = epilogue.empty() ? nullptr : &epilogue;
  if (handleDegenerate(M, N, K, alpha, beta, C, ldc, ep)) return;
  const SgemmKernelInfo& ki = sgemmKernelFor(B.isa());
  if (M == 1) {
    detail::sgemvPackedHalf(ki.isa, N, K, ki.nr, ki.kc, roundUp(N, ki.nr), alpha, A,
                            transA ? lda : 1, B.data(), beta, C, ep,
                            static_cast<float*>(workspace));
    return;
  }
  Operand b;
  b.half = B.data();
  b.padded = roundUp(N, ki.nr);
  Problem p{&ki, M, N, K, alpha, Operand{A, lda, transA}, b, beta, C, ldc, ep};
  runBlocked(p, static_cast<float*>(workspace));
}

}  // namespace kiln::cpu
