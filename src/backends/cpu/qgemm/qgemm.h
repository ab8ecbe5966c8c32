// Integer GEMM for 8-bit quantized operators: C[M x N] = L[M x K] x R[K x N] with one operand
// unsigned (u8: activations) and the other signed (s8: weights), int32 accumulation (vpdpbusd on
// AVX512-VNNI and AVX-VNNI, vpmaddubsw + vpmaddwd on AVX2), zero points compensated with row and
// column sums, then an epilogue on each C tile while it is in L1: int32 result, requantized u8/s8
// (float32 multiplier, round half to even, zero point, clamp), or dequantized float32.
//
// Other 8-bit kinds reduce to u8 x s8 exactly: s8 activations are stored +128 (x ^ 0x80, zero
// point + 128) and u8 weights -128 (zero point - 128); (a - za)(b - zb) does not change.
//
// The operand that is constant (weights) is packed once (packQWeights); the other is packed per
// call from a plain matrix (QMatrixView) into the caller's workspace. Conv puts the weights on the
// left (C = W x columns: output channels are rows, as in NCHW), MatMul on the right (C = A x B).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

enum class QSide { kLeft, kRight };

/// A plain 8-bit matrix: element (outer, k) at data[outer * outerStride + k * depthStride], where
/// outer is the row (left operand) or column (right operand). isSigned: int8 values, else uint8.
struct QMatrixView {
  const void* data = nullptr;
  int64_t outerStride = 0, depthStride = 0;
  bool isSigned = false;
};

/// A constant operand (weights) packed for one ISA's micro-kernel, stored as s8 (u8 weights are
/// stored -128), with the per-row (left) or per-column (right) sums of the stored values over K.
/// Copies share the packed bytes (immutable).
class KILN_INTERNAL_API PackedQMatrix {
 public:
  PackedQMatrix() = default;
  bool empty() const { return bytes_ == nullptr; }
  QSide side() const { return side_; }
  CpuIsa isa() const { return isa_; }
  /// Rows of a left operand, columns of a right one; and the depth K.
  int64_t outer() const { return outer_; }
  int64_t depth() const { return depth_; }
  /// The source was uint8 (stored -128: its zero point must be shifted by -128 too).
  bool sourceUnsigned() const { return sourceUnsigned_; }
  /// Every pair of consecutive stored weights along K (the pairs vpmaddubsw adds) has a sum of
  /// positive values <= 128 and of negative ones >= -128, so 255 * that sum fits int16: the fast
  /// AVX2 path cannot saturate (ONNX Runtime's reduce_range weights satisfy it).
  bool maddubsSafe() const { return maddubsSafe_; }
  const int8_t* data() const { return reinterpret_cast<const int8_t*>(bytes_.get()); }
  const int32_t* sums() const {
    return reinterpret_cast<const int32_t*>(bytes_.get() + sumsOffset());
  }

  /// All of it in one blob (packed values, then the sums) for a plan, and the parameters that go
  /// with it (source kind and the saturation flag).
  const uint8_t* blob() const { return bytes_.get(); }
  uint64_t blobBytes() const { return blobBytes(side_, isa_, outer_, depth_); }
  std::vector<uint8_t> params() const;
  static uint64_t blobBytes(QSide side, CpuIsa isa, int64_t outer, int64_t depth);
  /// A matrix packed earlier (a plan's blob) over `blob` of blobBytes(...) bytes; `params` is
  /// what params() wrote; false when they do not fit.
  static bool view(QSide side, CpuIsa isa, int64_t outer, int64_t depth,
                   const std::vector<uint8_t>& params, std::shared_ptr<const uint8_t> blob,
                   PackedQMatrix& out);

 private:
  friend PackedQMatrix packQWeights(QSide, CpuIsa, int64_t, int64_t, const QMatrixView&);
  uint64_t sumsOffset() const;
  std::shared_ptr<const uint8_t> bytes_;
  QSide side_ = QSide::kLeft;
  CpuIsa isa_ = CpuIsa::kAvx2;
  int64_t outer_ = 0, depth_ = 0;
  bool sourceUnsigned_ = false, maddubsSafe_ = false;
};

/// Packs weights (outer x depth) as the left or right operand of `isa`'s micro-kernel.
KILN_INTERNAL_API PackedQMatrix packQWeights(QSide side, CpuIsa isa, int64_t outer, int64_t depth,
                                             const QMatrixView& src);

/// What becomes of the int32 result v (zero points and int32 bias already in it), per element.
struct QGemmOutput {
  DataType dtype = DataType::kInt32;  // kInt32 (v), kUint8 / kInt8 (requantized), kFloat32 (scaled)
  /// One value, or one per output channel (the weights' rows or columns: C's rows when the
  /// weights are on the left): the requantization multiplier, or the float output's scale.
  const float* scale = nullptr;
  int64_t scaleCount = 1;
  /// Quantized: y = clamp(round_half_even(float(v) * scale) + zeroPoint, lowest, highest), the
  /// bounds the type's range narrowed by a fused Relu / Clip.
  int32_t zeroPoint = 0, lowest = 0, highest = 255;
  /// Float: y = clamp(fma(float(v), scale, floatBias[channel]), floatLowest, floatHighest); the
  /// bias, when given, has one value per output channel.
  const float* floatBias = nullptr;
  float floatLowest = -std::numeric_limits<float>::infinity(),
        floatHighest = std::numeric_limits<float>::infinity();
};

/// One product C = (L - zL)(R - zR) [+ bias] -> output. One operand is `weights`, packed; the
/// other, `activations`, a plain matrix packed per call. Zero points: one value or one per row
/// (zL, length M) / per column (zR, length N), as the operands hold them (s8 activations +128,
/// u8 weights -128 already applied by the caller: qZeroPoint below).
struct QGemmProblem {
  int64_t M = 0, N = 0, K = 0;
  const PackedQMatrix* weights = nullptr;  // the left operand when weights->side() == kLeft
  QMatrixView activations;
  const int32_t* zeroLeft = nullptr;  // null: 0
  int64_t zeroLeftCount = 1;
  const int32_t* zeroRight = nullptr;
  int64_t zeroRightCount = 1;
  const int32_t* bias = nullptr;  // one per output channel (weights' row or column); null: none
  QGemmOutput output;
  void* C = nullptr;
  int64_t ldc = 0;  // elements
};

/// Scratch bytes qgemm needs for an M x N x K problem with weights on `weightsSide`, on
/// `threads` threads (packed activations and the per-call correction terms).
KILN_INTERNAL_API uint64_t qgemmWorkspaceBytes(QSide weightsSide, CpuIsa isa, int64_t M, int64_t N,
                                               int64_t K, int threads);

/// Runs the problem on the current thread pool; `workspace` holds qgemmWorkspaceBytes(...) bytes
/// for the pool's size (64-byte aligned).
KILN_INTERNAL_API void qgemm(const QGemmProblem& p, void* workspace);

/// The zero point as the packed operand sees it: s8 activations + 128, u8 weights - 128.
inline int32_t qZeroPoint(int32_t zeroPoint, bool shiftedUp, bool shiftedDown) {
  return zeroPoint + (shiftedUp ? 128 : 0) - (shiftedDown ? 128 : 0);
}

}  // namespace kiln::cpu
