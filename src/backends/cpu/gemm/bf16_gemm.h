// GEMM in BF16 with FP32 accumulation (AVX512_BF16's vdpbf16ps): a constant operand (weights)
// rounded to BF16 (round to nearest even) and packed once, the other operand (activations)
// rounded while it is packed at run time, every product of two BF16 values summed in FP32, and
// the result tile finished by the same GemmEpilogue as sgemm. Runs only where
// cpuSupports(CpuIsa::kAvx512Bf16); callers check bf16GemmSupported() first.
//
// Packed layout (both sides): depth K padded to an even Kp, cut in blocks of kc depths (kc even,
// sized from the L1 cache); within a block, strips of mr rows (A) or nr columns (B), each a list
// of depth pairs, one 32-bit lane per row (column) and pair holding BF16(depth 2p) in its low
// half and BF16(depth 2p + 1) in its high half: what vdpbf16ps multiplies lane by lane.
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/gemm/gemm_epilogue.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Whether the BF16 GEMM can run now (the CPU has AVX512_BF16 and no ISA limit is below it).
KILN_INTERNAL_API bool bf16GemmSupported();

/// The depth of a packed block on this CPU (even; what packBf16A / packBf16B use).
KILN_INTERNAL_API int64_t bf16GemmDepthBlock();

/// A constant GEMM operand in BF16, packed once in the layout above. Copies share the data.
class KILN_INTERNAL_API PackedBf16Matrix {
 public:
  enum class Side { kA, kB };

  PackedBf16Matrix() = default;
  bool empty() const { return data_ == nullptr; }
  Side side() const { return side_; }
  /// The shape of op(X): M x K for an A operand, K x N for a B operand.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  /// The depth block it was packed with (a plan keeps it: another CPU may choose another).
  int64_t depthBlock() const { return kc_; }
  const uint32_t* data() const { return data_.get(); }
  /// 32-bit words (pairs of BF16) of the packing.
  int64_t words() const { return words_; }
  uint64_t bytes() const { return static_cast<uint64_t>(words_) * sizeof(uint32_t); }

  /// Words packing a rows x cols operand on `side` takes.
  static int64_t packedWords(Side side, int64_t rows, int64_t cols);
  /// A packing made earlier (saved in a plan) over `data`, which holds packedWords(...) words
  /// packed with depth block `kc`; `data` keeps them alive.
  static PackedBf16Matrix view(Side side, int64_t rows, int64_t cols, int64_t kc,
                               std::shared_ptr<const uint32_t> data);

 private:
  friend PackedBf16Matrix packBf16(Side, bool, int64_t, int64_t, const float*, int64_t);
  std::shared_ptr<const uint32_t> data_;
  Side side_ = Side::kB;
  int64_t rows_ = 0, cols_ = 0, kc_ = 0, words_ = 0;
};

/// Packs op(A) (M x K; A is K x M when transA) as the left operand: Conv weights (W x columns).
KILN_INTERNAL_API PackedBf16Matrix packBf16A(bool transA, int64_t M, int64_t K, const float* A,
                                             int64_t lda);
/// Packs op(B) (K x N; B is N x K when transB) as the right operand: MatMul and Gemm weights.
KILN_INTERNAL_API PackedBf16Matrix packBf16B(bool transB, int64_t K, int64_t N, const float* B,
                                             int64_t ldb);

/// Scratch bytes bf16GemmPacked needs with `packed` as one operand (the other one packed whole):
/// `other` is M (rows of A) for a packed B, N (columns of B) for a packed A.
KILN_INTERNAL_API uint64_t bf16GemmWorkspaceBytes(const PackedBf16Matrix& packed, int64_t other);

/// C = epilogue(op(A) * B + beta * C), A float32 rounded to BF16 while packed; M x N x K with
/// K == B.rows(), N == B.cols(). When beta == 0, C is not read. Runs on the current thread pool.
/// `workspace`: bf16GemmWorkspaceBytes(B, M) bytes, 64-byte aligned.
KILN_INTERNAL_API void bf16GemmPacked(bool transA, int64_t M, const float* A, int64_t lda,
                                      const PackedBf16Matrix& B, float beta, float* C, int64_t ldc,
                                      void* workspace, const GemmEpilogue& epilogue = {});
/// C = epilogue(A * op(B) + beta * C) with A packed; M == A.rows(), K == A.cols().
/// `workspace`: bf16GemmWorkspaceBytes(A, N) bytes.
KILN_INTERNAL_API void bf16GemmPacked(const PackedBf16Matrix& A, int64_t N, bool transB,
                                      const float* B, int64_t ldb, float beta, float* C,
                                      int64_t ldc, void* workspace,
                                      const GemmEpilogue& epilogue = {});

}  // namespace kiln::cpu
