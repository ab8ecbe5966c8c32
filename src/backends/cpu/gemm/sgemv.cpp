#include "backends/cpu/gemm/sgemv.h"

#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/thread_pool.h"

namespace kiln::cpu::detail {
namespace {

// Matrix floats below which one thread does the whole product (about 15 microseconds of streaming,
// a few times the pool's dispatch cost).
constexpr int64_t kMinParallelFloats = int64_t{1} << 16;

// How far ahead of the current read each weight stream is prefetched: the hardware prefetchers
// stop at 4 KiB pages, and several streams in flight need more requests than they issue.
constexpr int64_t kPrefetchBytes = 1024;

inline void prefetch(const float* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

inline float horizontalSum(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Lane mask for the first n (< 8) floats of a vector, for _mm256_maskload_ps.
inline __m256i firstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Runs fn(u0, u1) over [0, units) split over the current pool when the product (`floats` matrix
// floats) is large enough, else inline.
template <typename Fn>
void splitOutputs(int64_t units, int64_t floats, Fn&& fn) {
  ThreadPool* pool = currentThreadPool();
  if (!pool || pool->size() == 1 || units < 2 || floats < kMinParallelFloats) {
    fn(int64_t{0}, units);
    return;
  }
  pool->parallelFor(units, fn);
}

// The outputs of R rows of a row-major matrix at once (R weight streams): dot products of each
// row with xs (alpha already applied), 16 depths per step in two accumulators per row.
template <int R>
void dotRows(const float* P, int64_t ld, int64_t K, const float* xs, float* out) {
  __m256 a[R], b[R];
  for (int r = 0; r < R; ++r) a[r] = b[r] = _mm256_setzero_ps();
  constexpr int64_t ahead = kPrefetchBytes / sizeof(float);
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 x0 = _mm256_loadu_ps(xs + k), x1 = _mm256_loadu_ps(xs + k + 8);
    for (int r = 0; r < R; ++r) {
      const float* row = P + r * ld + k;
      prefetch(row + ahead);
      a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(row), x0, a[r]);
      b[r] = _mm256_fmadd_ps(_mm256_loadu_ps(row + 8), x1, b[r]);
    }
  }
  if (k + 8 <= K) {
    const __m256 x0 = _mm256_loadu_ps(xs + k);
    for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(P + r * ld + k), x0, a[r]);
    k += 8;
  }
  if (k < K) {
    const __m256i m = firstLanes(K - k);
    const __m256 x0 = _mm256_maskload_ps(xs + k, m);
    for (int r = 0; r < R; ++r)
      b[r] = _mm256_fmadd_ps(_mm256_maskload_ps(P + r * ld + k, m), x0, b[r]);
  }
  for (int r = 0; r < R; ++r) out[r] = horizontalSum(_mm256_add_ps(a[r], b[r]));
}

// acc[0 .. n) += sum_k xs[k] * P[k * ld + j] for k < K: four rows of P per pass over acc (four
// weight streams, one load and store of acc per four rows).
void axpyRows(const float* P, int64_t ld, int64_t K, const float* xs, int64_t n, float* acc) {
  const int64_t vecEnd = n / 8 * 8;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const float* p0 = P + k * ld;
    const float* p1 = p0 + ld;
    const float* p2 = p1 + ld;
    const float* p3 = p2 + ld;
    const __m256 x0 = _mm256_set1_ps(xs[k]), x1 = _mm256_set1_ps(xs[k + 1]);
    const __m256 x2 = _mm256_set1_ps(xs[k + 2]), x3 = _mm256_set1_ps(xs[k + 3]);
    int64_t j = 0;
    for (; j < vecEnd; j += 8) {
      __m256 s = _mm256_loadu_ps(acc + j);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(p0 + j), x0, s);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(p1 + j), x1, s);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(p2 + j), x2, s);
      s = _mm256_fmadd_ps(_mm256_loadu_ps(p3 + j), x3, s);
      _mm256_storeu_ps(acc + j, s);
    }
    for (; j < n; ++j)
      acc[j] += xs[k] * p0[j] + xs[k + 1] * p1[j] + xs[k + 2] * p2[j] + xs[k + 3] * p3[j];
  }
  for (; k < K; ++k) {
    const float* p = P + k * ld;
    const __m256 xv = _mm256_set1_ps(xs[k]);
    int64_t j = 0;
    for (; j < vecEnd; j += 8)
      _mm256_storeu_ps(acc + j,
                       _mm256_fmadd_ps(_mm256_loadu_ps(p + j), xv, _mm256_loadu_ps(acc + j)));
    for (; j < n; ++j) acc[j] += xs[k] * p[j];
  }
}

// G packed strips of NR columns at once (G weight streams, G * NR / 8 accumulators), over all
// the kc blocks; writes the strips' NR * G sums to out. Each block's sums are added to out
// separately (sums of kc products, not one chain of K: closer to the blocked GEMM's rounding).
template <int NR, int G>
void packedStrips(const float* packed, int64_t K, int64_t kc, int64_t padded, int64_t strip,
                  const float* xs, float* out) {
  constexpr int V = NR / 8;
  constexpr int64_t ahead = kPrefetchBytes / sizeof(float);
  std::fill(out, out + G * NR, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t depth = std::min(kc, K - k0);
    const float* block = packed + k0 * padded + strip * NR * depth;
    const float* x = xs + k0;
    __m256 acc[G][V];
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < V; ++v) acc[g][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < depth; ++k) {
      const __m256 xv = _mm256_set1_ps(x[k]);
      for (int g = 0; g < G; ++g) {
        const float* p = block + g * NR * depth + k * NR;
        for (int v = 0; v < V; v += 2) prefetch(p + ahead + v * 8);  // one line per 16 floats
        for (int v = 0; v < V; ++v)
          acc[g][v] = _mm256_fmadd_ps(_mm256_loadu_ps(p + v * 8), xv, acc[g][v]);
      }
    }
    for (int g = 0; g < G; ++g)
      for (int v = 0; v < V; ++v) {
        float* o = out + g * NR + v * 8;
        _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), acc[g][v]));
      }
  }
}

// Any nr (a multiple of 8), one strip at a time.
void packedStripGeneric(const float* packed, int64_t nr, int64_t K, int64_t kc, int64_t padded,
                        int64_t strip, const float* xs, float* out) {
  std::fill(out, out + nr, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t depth = std::min(kc, K - k0);
    const float* block = packed + k0 * padded + strip * nr * depth;
    for (int64_t k = 0; k < depth; ++k) {
      const __m256 xv = _mm256_set1_ps(xs[k0 + k]);
      for (int64_t c = 0; c < nr; c += 8) {
        _mm256_storeu_ps(out + c, _mm256_fmadd_ps(_mm256_loadu_ps(block + k * nr + c), xv,
                                                  _mm256_loadu_ps(out + c)));
      }
    }
  }
}

// Strips [s0, s1) of a packed B with NR-column strips, G at a time; sums to acc (s1 - s0) * NR.
template <int NR>
void packedRange(const float* packed, int64_t K, int64_t kc, int64_t padded, int64_t s0, int64_t s1,
                 const float* xs, float* acc) {
  constexpr int G = 64 / NR;  // 8 accumulators of the 16 registers
  int64_t s = s0;
  for (; s + G <= s1; s += G)
    packedStrips<NR, G>(packed, K, kc, padded, s, xs, acc + (s - s0) * NR);
  for (; s < s1; ++s) packedStrips<NR, 1>(packed, K, kc, padded, s, xs, acc + (s - s0) * NR);
}

// Floats rounded up to whole cache lines (each scratch buffer starts 64-byte aligned).
int64_t lineFloats(int64_t floats) { return (floats + 15) / 16 * 16; }

// alpha * x gathered into the start of the scratch (8 floats of slack for the vector loads).
const float* scaledVector(const float* x, int64_t incX, int64_t K, float alpha, float* buffer) {
  for (int64_t k = 0; k < K; ++k) buffer[k] = alpha * x[k * incX];
  return buffer;
}

// y[i * incY] = sums[i] + beta * y[i * incY] for i < n.
void storeOutputs(const float* sums, int64_t n, float beta, float* y, int64_t incY) {
  for (int64_t i = 0; i < n; ++i) {
    float& out = y[i * incY];
    out = beta == 0.0f ? sums[i] : sums[i] + beta * out;
  }
}

}  // namespace

int64_t sgemvScratchFloats(int64_t L, int64_t K) { return lineFloats(K + 8) + lineFloats(L); }

void sgemv(int64_t L, int64_t K, float alpha, const float* P, int64_t ld, bool rowMajor,
           const float* x, int64_t incX, float beta, float* y, int64_t incY, const GemmEpilogue* ep,
           bool rowOutput, float* scratch) {
  const float* xs = scaledVector(x, incX, K, alpha, scratch);
  float* allSums = scratch + lineFloats(K + 8);  // each thread's outputs at their own offset
  // Output units: 4 rows (one dotRows call), or 64 columns of the axpy (contiguous weight runs).
  const int64_t unit = rowMajor ? 4 : 64;
  splitOutputs((L + unit - 1) / unit, L * K, [&](int64_t u0, int64_t u1) {
    const int64_t i0 = u0 * unit, i1 = std::min(L, u1 * unit), n = i1 - i0;
    float* sums = allSums + i0;
    std::fill(sums, sums + n, 0.0f);
    if (rowMajor) {
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) dotRows<4>(P + (i0 + i) * ld, ld, K, xs, sums + i);
      for (; i < n; ++i) dotRows<1>(P + (i0 + i) * ld, ld, K, xs, sums + i);
    } else {
      axpyRows(P + i0, ld, K, xs, n, sums);
    }
    float* out = y + i0 * incY;
    storeOutputs(sums, n, beta, out, incY);
    if (ep) {
      if (rowOutput)
        applyGemmEpilogue(*ep, out, incY, 1, n, 0, i0);
      else
        applyGemmEpilogue(*ep, out, incY, n, 1, i0, 0);
    }
  });
}

namespace {

// sgemvPacked's frame for any element type: xs scaled, strips split over the pool, each part's
// sums (strips(s0, s1, xs, sums)) stored and finished by the epilogue.
template <typename Strips>
void packedProduct(int64_t N, int64_t K, int64_t nr, int64_t padded, float alpha, const float* x,
                   int64_t incX, float beta, float* y, const GemmEpilogue* ep, float* scratch,
                   Strips&& strips) {
  const float* xs = scaledVector(x, incX, K, alpha, scratch);
  float* allSums = scratch + lineFloats(K + 8);  // padded sums, each thread's strips at their own
  splitOutputs((N + nr - 1) / nr, padded * K, [&](int64_t s0, int64_t s1) {
    float* sums = allSums + s0 * nr;
    strips(s0, s1, xs, sums);
    const int64_t j0 = s0 * nr, n = std::min(N, s1 * nr) - j0;
    storeOutputs(sums, n, beta, y + j0, 1);
    if (ep) applyGemmEpilogue(*ep, y + j0, n, 1, n, 0, j0);
  });
}

// Strips [s0, s1) of NR half-precision columns, one strip at a time (one weight stream), each kc
// block summed apart as packedStrips sums it.
template <int NR>
void halfStrips(const uint16_t* packed, int64_t K, int64_t kc, int64_t padded, int64_t s0,
                int64_t s1, const float* xs, float* out) {
  constexpr int V = NR / 8;
  for (int64_t s = s0; s < s1; ++s) {
    float* o = out + (s - s0) * NR;
    std::fill(o, o + NR, 0.0f);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t depth = std::min(kc, K - k0);
      const uint16_t* p = packed + k0 * padded + s * NR * depth;
      __m256 acc[V];
      for (int v = 0; v < V; ++v) acc[v] = _mm256_setzero_ps();
      for (int64_t k = 0; k < depth; ++k, p += NR) {
        const __m256 xv = _mm256_set1_ps(xs[k0 + k]);
        for (int v = 0; v < V; ++v) {
          const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + v * 8));
          acc[v] = _mm256_fmadd_ps(_mm256_cvtph_ps(h), xv, acc[v]);
        }
      }
      for (int v = 0; v < V; ++v)
        _mm256_storeu_ps(o + v * 8, _mm256_add_ps(_mm256_loadu_ps(o + v * 8), acc[v]));
    }
  }
}

}  // namespace

void sgemvPacked(CpuIsa isa, int64_t N, int64_t K, int64_t nr, int64_t kc, int64_t padded,
                 float alpha, const float* x, int64_t incX, const float* packed, float beta,
                 float* y, const GemmEpilogue* ep, float* scratch) {
  packedProduct(N, K, nr, padded, alpha, x, incX, beta, y, ep, scratch,
                [&](int64_t s0, int64_t s1, const float* xs, float* sums) {
                  if (isa == CpuIsa::kAvx512 && nr == 32) {
                    packedStripsAvx512(packed, K, kc, padded, s0, s1, xs, sums);
                  } else if (nr == 32) {
                    packedRange<32>(packed, K, kc, padded, s0, s1, xs, sums);
                  } else if (nr == 16) {
                    packedRange<16>(packed, K, kc, padded, s0, s1, xs, sums);
                  } else {
                    for (int64_t s = s0; s < s1; ++s)
                      packedStripGeneric(packed, nr, K, kc, padded, s, xs, sums + (s - s0) * nr);
                  }
                });
}

void sgemvPackedHalf(CpuIsa isa, int64_t N, int64_t K, int64_t nr, int64_t kc, int64_t padded,
                     float alpha, const float* x, int64_t incX, const uint16_t* packed, float beta,
                     float* y, const GemmEpilogue* ep, float* scratch) {
  packedProduct(N, K, nr, padded, alpha, x, incX, beta, y, ep, scratch,
                [&](int64_t s0, int64_t s1, const float* xs, float* sums) {
                  if (isa == CpuIsa::kAvx512 && nr == 32) {
                    packedHalfStripsAvx512(packed, K, kc, padded, s0, s1, xs, sums);
                  } else if (nr == 32) {
                    halfStrips<32>(packed, K, kc, padded, s0, s1, xs, sums);
                  } else {
                    halfStrips<16>(packed, K, kc, padded, s0, s1, xs, sums);
                  }
                });
}

}  // namespace kiln::cpu::detail
