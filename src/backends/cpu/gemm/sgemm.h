// Matrix multiply with BLAS gemm semantics: a fast SGEMM for float (cache-blocked, register-tiled,
// AVX-512 or AVX2 picked at run time), constant operands packed once, fused epilogues, and a plain
// reference for other types.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/gemm_epilogue.h"
#include "backends/cpu/thread_pool.h"
#include "core/internal_api.h"

namespace kiln::cpu {

class PackedMatrix;

/// C[M x N] = epilogue(alpha * op(A) * op(B) + beta * C), all row-major. op(A) is M x K: A is
/// M x K with row stride lda, or K x M when transA. op(B) is K x N: B is K x N with row stride
/// ldb, or N x K when transB. When beta == 0, C is not read (NaNs in it do not propagate). The
/// epilogue (act(... + bias + residual)) is applied to each C tile right after its last update,
/// while it is in cache. Runs on the current thread pool (currentThreadPool()) when the product
/// is large enough. `workspace` is the caller's scratch for the packed panels:
/// sgemmWorkspaceBytes(M, N, K, poolThreads()) bytes, 64-byte aligned (a kernel's
/// ctx.workspace); sgemm allocates nothing. A caller inside a parallel loop body makes the
/// product serial (ThreadPoolScope(nullptr)) and sizes it for one thread.
KILN_INTERNAL_API void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
                             const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                             float* C, int64_t ldc, void* workspace,
                             const GemmEpilogue& epilogue = {});

/// Scratch bytes sgemm needs for an M x N x K product split over `threads` threads: a packed A
/// block and B panel per thread, or one op(B) packing the threads share (0 for empty products).
KILN_INTERNAL_API uint64_t sgemmWorkspaceBytes(int64_t M, int64_t N, int64_t K, int threads);

/// Scratch bytes sgemmPacked needs with `packed` as one operand: `other` is M (rows of A) for a
/// packed B, N (columns of B) for a packed A.
KILN_INTERNAL_API uint64_t sgemmWorkspaceBytes(const PackedMatrix& packed, int64_t other,
                                               int threads);

/// A constant GEMM operand packed once into the micro-kernel's layout (for the ISA it was packed
/// for; products with it run that ISA's micro-kernel), so every later product skips that packing:
/// weights packed when a kernel is created. Copies share the packed data (immutable), so kernels
/// may be copied freely.
class KILN_INTERNAL_API PackedMatrix {
 public:
  enum class Side { kA, kB };

  PackedMatrix() = default;
  bool empty() const { return data_ == nullptr; }
  Side side() const { return side_; }
  /// The shape of op(X): M x K for an A operand, K x N for a B operand.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  CpuIsa isa() const { return isa_; }
  const float* data() const { return data_.get(); }
  /// The packed floats (the layout pads the outer dimension to whole micro-kernel strips).
  int64_t floats() const { return floats_; }

  /// How many floats packing a rows x cols operand on `side` for `isa` makes.
  static int64_t packedFloats(Side side, CpuIsa isa, int64_t rows, int64_t cols);
  /// A matrix packed earlier (by packA / packB for `isa`, e.g. stored in a plan) over `data`,
  /// which holds packedFloats(side, isa, rows, cols) floats; `data` keeps them alive.
  static PackedMatrix view(Side side, CpuIsa isa, int64_t rows, int64_t cols,
                           std::shared_ptr<const float> data);

 private:
  friend PackedMatrix packWhole(Side, bool, int64_t, int64_t, const float*, int64_t, CpuIsa);
  std::shared_ptr<const float> data_;
  Side side_ = Side::kB;
  CpuIsa isa_ = CpuIsa::kAvx2;
  int64_t rows_ = 0, cols_ = 0;
  int64_t floats_ = 0;
};

/// Packs op(A) (M x K; A is K x M when transA) as the left operand: Conv weights (W x columns),
/// for the micro-kernel of `isa` (a kernel candidate's own ISA; by default the active one).
KILN_INTERNAL_API PackedMatrix packA(bool transA, int64_t M, int64_t K, const float* A, int64_t lda,
                                     CpuIsa isa = activeCpuIsa());
/// Packs op(B) (K x N; B is N x K when transB) as the right operand: MatMul and Gemm weights.
KILN_INTERNAL_API PackedMatrix packB(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb,
                                     CpuIsa isa = activeCpuIsa());

/// A constant B operand (weights) packed once in packB's layout for `isa`'s micro-kernel, each
/// value rounded to IEEE half precision (round to nearest even): half the bytes of PackedMatrix.
/// Products widen it back to float32 (exactly) as they read it and compute in float32, so only
/// the weights' rounding differs from float32: kFP16's weight storage. Copies share the data.
class KILN_INTERNAL_API PackedHalfMatrix {
 public:
  PackedHalfMatrix() = default;
  bool empty() const { return data_ == nullptr; }
  /// The shape of op(B): K x N.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  CpuIsa isa() const { return isa_; }
  const uint16_t* data() const { return data_.get(); }
  /// The packed half values (PackedMatrix::packedFloats of the same shape).
  int64_t values() const { return values_; }
  uint64_t bytes() const { return static_cast<uint64_t>(values_) * sizeof(uint16_t); }

  /// A packing made earlier (stored in a plan) over `data`, which holds
  /// PackedMatrix::packedFloats(Side::kB, isa, rows, cols) values; `data` keeps them alive.
  static PackedHalfMatrix view(CpuIsa isa, int64_t rows, int64_t cols,
                               std::shared_ptr<const uint16_t> data);

 private:
  friend PackedHalfMatrix packBHalf(bool, int64_t, int64_t, const float*, int64_t, CpuIsa);
  std::shared_ptr<const uint16_t> data_;
  CpuIsa isa_ = CpuIsa::kAvx2;
  int64_t rows_ = 0, cols_ = 0, values_ = 0;
};

/// Packs op(B) (K x N; B is N x K when transB) in half precision, as packB packs it in float.
KILN_INTERNAL_API PackedHalfMatrix packBHalf(bool transB, int64_t K, int64_t N, const float* B,
                                             int64_t ldb, CpuIsa isa = activeCpuIsa());

/// C = epilogue(alpha * op(A) * B + beta * C) with B from packBHalf, as sgemmPacked: each kc x nc
/// panel of B widened to float32 into the workspace before the micro-kernel reads it (M == 1: the
/// matrix-vector product reads the halves themselves, at half the bytes).
/// `workspace`: sgemmWorkspaceBytes(B, M, poolThreads()) bytes.
KILN_INTERNAL_API void sgemmPackedHalf(bool transA, int64_t M, float alpha, const float* A,
                                       int64_t lda, const PackedHalfMatrix& B, float beta, float* C,
                                       int64_t ldc, void* workspace,
                                       const GemmEpilogue& epilogue = {});
/// Scratch bytes sgemmPackedHalf needs for M rows of A.
KILN_INTERNAL_API uint64_t sgemmWorkspaceBytes(const PackedHalfMatrix& packed, int64_t M,
                                               int threads);

/// C = epilogue(alpha * op(A) * B + beta * C) with B from packB; M x N x K as in sgemm, with
/// K == B.rows() and N == B.cols(). `workspace`: sgemmWorkspaceBytes(B, M, poolThreads()) bytes.
KILN_INTERNAL_API void sgemmPacked(bool transA, int64_t M, float alpha, const float* A, int64_t lda,
                                   const PackedMatrix& B, float beta, float* C, int64_t ldc,
                                   void* workspace, const GemmEpilogue& epilogue = {});
/// C = epilogue(alpha * A * op(B) + beta * C) with A from packA; M == A.rows(), K == A.cols().
/// `workspace`: sgemmWorkspaceBytes(A, N, poolThreads()) bytes.
KILN_INTERNAL_API void sgemmPacked(const PackedMatrix& A, int64_t N, float alpha, bool transB,
                                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                                   void* workspace, const GemmEpilogue& epilogue = {});

/// The same contract as sgemm for any arithmetic T, with plain loops. Integers wrap around on
/// overflow like numpy's (the arithmetic is done unsigned).
template <typename T>
void referenceGemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                   int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  using Acc = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                          std::type_identity<T>>::type;
  auto a = [&](int64_t i, int64_t k) {
    return static_cast<Acc>(transA ? A[k * lda + i] : A[i * lda + k]);
  };
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j)
      c[j] = beta == T(0) ? T(0) : static_cast<T>(static_cast<Acc>(beta) * static_cast<Acc>(c[j]));
    if (!transB) {
      for (int64_t k = 0; k < K; ++k) {
        const Acc av = static_cast<Acc>(alpha) * a(i, k);
        const T* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j)
          c[j] = static_cast<T>(static_cast<Acc>(c[j]) + av * static_cast<Acc>(b[j]));
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

/// Scratch bytes gemm<T> needs: sgemm's for float, none otherwise.
template <typename T>
uint64_t gemmWorkspaceBytes(int64_t M, int64_t N, int64_t K, int threads) {
  return std::is_same_v<T, float> ? sgemmWorkspaceBytes(M, N, K, threads) : 0;
}

/// sgemm for float, referenceGemm otherwise (which needs no workspace); lets templated kernels
/// call one name.
template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, void* workspace) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, workspace);
  } else {
    referenceGemm<T>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace kiln::cpu
