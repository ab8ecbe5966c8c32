// Cache-blocked SGEMM in the Goto/BLIS style: a K x N panel of op(B) is packed into 16-column
// strips (kept in L2/L3), an M x K block of op(A) into 6-row strips (kept in L2), and an AVX2/FMA
// micro-kernel multiplies one 6-row strip by one 16-column strip with 12 ymm accumulators.
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kMR = 6;     // micro-tile rows
constexpr int64_t kNR = 16;    // micro-tile columns (two ymm vectors)
constexpr int64_t kKC = 256;   // depth of a packed block: one B strip (16 KiB) stays in L1
constexpr int64_t kMC = 144;   // rows of a packed A block (144 KiB, in L2)
constexpr int64_t kNC = 2048;  // columns of a packed B panel (2 MiB)

// Packs rows [i0, i0+mc) x depth [k0, k0+kc) of alpha*op(A) into 6-row strips, each stored
// k-major (6 values per k), zero-padding the last strip.
void packA(bool transA, const float* A, int64_t lda, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float alpha,
           float* dst) {
  for (int64_t s = 0; s < mc; s += kMR) {
    const int64_t rows = std::min(kMR, mc - s);
    if (transA) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + i0 + s;
        int64_t r = 0;
        for (; r < rows; ++r) dst[r] = alpha * src[r];
        for (; r < kMR; ++r) dst[r] = 0.0f;
        dst += kMR;
      }
    } else {
      const float* src[kMR];
      for (int64_t r = 0; r < kMR; ++r) src[r] = A + (i0 + s + std::min(r, rows - 1)) * lda + k0;
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < kMR; ++r) dst[r] = r < rows ? alpha * src[r][k] : 0.0f;
        dst += kMR;
      }
    }
  }
}

// Packs depth [k0, k0+kc) x columns [j0, j0+nc) of op(B) into 16-column strips, each stored
// k-major (16 values per k), zero-padding the last strip.
void packB(bool transB, const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  for (int64_t s = 0; s < nc; s += kNR) {
    const int64_t cols = std::min(kNR, nc - s);
    if (!transB) {
      const float* src = B + k0 * ldb + j0 + s;
      if (cols == kNR) {
        for (int64_t k = 0; k < kc; ++k) {
          _mm256_storeu_ps(dst, _mm256_loadu_ps(src));
          _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(src + 8));
          src += ldb;
          dst += kNR;
        }
      } else {
        for (int64_t k = 0; k < kc; ++k) {
          int64_t c = 0;
          for (; c < cols; ++c) dst[c] = src[c];
          for (; c < kNR; ++c) dst[c] = 0.0f;
          src += ldb;
          dst += kNR;
        }
      }
    } else {
      // op(B)(k, j) = B[j * ldb + k]: walk each source row contiguously, scatter by 16.
      for (int64_t c = 0; c < kNR; ++c) {
        if (c < cols) {
          const float* src = B + (j0 + s + c) * ldb + k0;
          for (int64_t k = 0; k < kc; ++k) dst[k * kNR + c] = src[k];
        } else {
          for (int64_t k = 0; k < kc; ++k) dst[k * kNR + c] = 0.0f;
        }
      }
      dst += kc * kNR;
    }
  }
}

// c[6 x 16] (row stride ldc) = (accumulate ? c : 0) + a-strip * b-strip over kc steps.
void microKernel6x16(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += kMR;
    b += kNR;
  }
  const __m256 acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int64_t r = 0; r < kMR; ++r) {
    float* row = c + r * ldc;
    __m256 lo = acc[r][0], hi = acc[r][1];
    if (accumulate) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(row));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(row + 8));
    }
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
  }
}

// A partial tile (rows < 6 or cols < 16): computed whole into a scratch tile, then the valid part is
// written to C.
void edgeKernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t rows, int64_t cols,
                bool accumulate) {
  alignas(32) float tile[kMR * kNR];
  microKernel6x16(kc, a, b, tile, kNR, false);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    const float* t = tile + r * kNR;
    if (accumulate) {
      for (int64_t j = 0; j < cols; ++j) row[j] += t[j];
    } else {
      for (int64_t j = 0; j < cols; ++j) row[j] = t[j];
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

float dot(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float sum = _mm_cvtss_f32(h);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[i * incY] = alpha * sum_k P(i, k) * x[k * incX] + beta * y[i * incY] for i < L, where
// P(i, k) is P[i * ld + k] (rowMajor: one dot product per output) or P[k * ld + i] (one axpy per
// k). Matrix-vector products (M == 1 or N == 1) take this path: packing would cost as much as
// the arithmetic.
void gemv(int64_t L, int64_t K, float alpha, const float* P, int64_t ld, bool rowMajor, const float* x, int64_t incX,
          float beta, float* y, int64_t incY) {
  thread_local std::vector<float> xs, acc;
  xs.resize(static_cast<size_t>(K));
  acc.assign(static_cast<size_t>(L), 0.0f);
  for (int64_t k = 0; k < K; ++k) xs[k] = alpha * x[k * incX];
  if (rowMajor) {
    for (int64_t i = 0; i < L; ++i) acc[i] = dot(P + i * ld, xs.data(), K);
  } else {
    float* out = acc.data();
    for (int64_t k = 0; k < K; ++k) {
      const float s = xs[k];
      const float* row = P + k * ld;
      for (int64_t i = 0; i < L; ++i) out[i] += s * row[i];
    }
  }
  for (int64_t i = 0; i < L; ++i) {
    float& out = y[i * incY];
    out = beta == 0.0f ? acc[i] : acc[i] + beta * out;
  }
}

struct PackBuffers {
  std::vector<float> a;
  std::vector<float> b;
};

constexpr int64_t kMinParallelWork = int64_t{1} << 18;  // M*N*K below which one thread is faster

void blockedGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

PackBuffers& threadPackBuffers() {
  thread_local PackBuffers buffers;
  return buffers;
}

}  // namespace

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    if (beta != 1.0f) scaleC(M, N, beta, C, ldc);
    return;
  }
  if (M == 1) {  // row vector times op(B): C^T = op(B)^T a
    gemv(N, K, alpha, B, ldb, transB, A, transA ? lda : 1, beta, C, 1);
    return;
  }
  if (N == 1) {  // op(A) times a column vector
    gemv(M, K, alpha, A, lda, !transA, B, transB ? 1 : ldb, beta, C, ldc);
    return;
  }
  // Blocks after the first K block always add to C; the first one adds only when beta != 0.
  if (beta != 0.0f && beta != 1.0f) scaleC(M, N, beta, C, ldc);
  ThreadPool* pool = currentThreadPool();
  if (!pool || pool->size() == 1 || M * N * K < kMinParallelWork) {
    blockedGemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Split C into column (or, when it is taller than wide, row) blocks of whole micro-tiles;
  // each thread packs its own panels.
  if (N >= M) {
    const int64_t tiles = (N + kNR - 1) / kNR;
    pool->parallelFor(tiles, [&](int64_t t0, int64_t t1) {
      const int64_t j0 = t0 * kNR, j1 = std::min(N, t1 * kNR);
      blockedGemm(transA, transB, M, j1 - j0, K, alpha, A, lda, transB ? B + j0 * ldb : B + j0, ldb, beta, C + j0, ldc);
    });
  } else {
    const int64_t tiles = (M + kMR - 1) / kMR;
    pool->parallelFor(tiles, [&](int64_t t0, int64_t t1) {
      const int64_t i0 = t0 * kMR, i1 = std::min(M, t1 * kMR);
      blockedGemm(transA, transB, i1 - i0, N, K, alpha, transA ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
                  C + i0 * ldc, ldc);
    });
  }
}

namespace {

// The single-threaded Goto loop nest over one block of C (beta already applied unless 0 or 1).
void blockedGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  PackBuffers& buf = threadPackBuffers();
  const int64_t ncMax = std::min(kNC, (N + kNR - 1) / kNR * kNR);
  const int64_t mcMax = std::min(kMC, (M + kMR - 1) / kMR * kMR);
  const int64_t kcMax = std::min(kKC, K);
  buf.b.resize(static_cast<size_t>(ncMax * kcMax));
  buf.a.resize(static_cast<size_t>(mcMax * kcMax));
  float* packedB = buf.b.data();
  float* packedA = buf.a.data();

  for (int64_t j0 = 0; j0 < N; j0 += kNC) {
    const int64_t nc = std::min(kNC, N - j0);
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      const bool accumulate = k0 > 0 || beta != 0.0f;
      packB(transB, B, ldb, k0, kc, j0, nc, packedB);
      for (int64_t i0 = 0; i0 < M; i0 += kMC) {
        const int64_t mc = std::min(kMC, M - i0);
        packA(transA, A, lda, i0, mc, k0, kc, alpha, packedA);
        for (int64_t js = 0; js < nc; js += kNR) {
          const int64_t cols = std::min(kNR, nc - js);
          const float* bStrip = packedB + js * kc;
          for (int64_t is = 0; is < mc; is += kMR) {
            const int64_t rows = std::min(kMR, mc - is);
            const float* aStrip = packedA + is * kc;
            float* c = C + (i0 + is) * ldc + j0 + js;
            if (rows == kMR && cols == kNR) {
              microKernel6x16(kc, aStrip, bStrip, c, ldc, accumulate);
            } else {
              edgeKernel(kc, aStrip, bStrip, c, ldc, rows, cols, accumulate);
            }
          }
        }
      }
    }
  }
}

}  // namespace

}  // namespace kiln::cpu
