// Matrix multiply with BLAS gemm semantics: a fast SGEMM for float and a plain reference for other types.
#pragma once
#include <cstdint>
#include <type_traits>

namespace kiln::cpu {

/// C[M x N] = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is M x K: A is M x K with
/// row stride lda, or K x M when transA. op(B) is K x N: B is K x N with row stride ldb, or N x K
/// when transB. When beta == 0, C is not read (NaNs in it do not propagate).
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

/// The same contract as sgemm for any arithmetic T, with plain loops. Integers wrap around on
/// overflow like numpy's (the arithmetic is done unsigned).
template <typename T>
void referenceGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  using Acc = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>, std::type_identity<T>>::type;
  auto a = [&](int64_t i, int64_t k) { return static_cast<Acc>(transA ? A[k * lda + i] : A[i * lda + k]); };
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j)
      c[j] = beta == T(0) ? T(0) : static_cast<T>(static_cast<Acc>(beta) * static_cast<Acc>(c[j]));
    if (!transB) {
      for (int64_t k = 0; k < K; ++k) {
        const Acc av = static_cast<Acc>(alpha) * a(i, k);
        const T* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] = static_cast<T>(static_cast<Acc>(c[j]) + av * static_cast<Acc>(b[j]));
      }
    } else {
      for (int64_t j = 0; j < N; ++j) {
        const T* b = B + j * ldb;
        Acc sum = 0;
        for (int64_t k = 0; k < K; ++k) sum += a(i, k) * static_cast<Acc>(b[k]);
        c[j] = static_cast<T>(static_cast<Acc>(c[j]) + static_cast<Acc>(alpha) * sum);
      }
    }
  }
}

/// sgemm for float, referenceGemm otherwise; lets templated kernels call one name.
template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    referenceGemm<T>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace kiln::cpu
