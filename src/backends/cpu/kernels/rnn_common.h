// Shared pieces of the RNN, GRU and LSTM kernels: attributes, activation functions, layouts,
// the input projection of every time step at once, and writing Y / Y_h / Y_c.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/vector_math.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu::rnn {

enum class ActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  ActivationKind kind = ActivationKind::kTanh;
  float alpha = 0;
  float beta = 0;
};

struct RecurrentAttrs {
  int64_t directions = 1;
  bool reverse = false;  // direction == "reverse"
  int64_t layout = 0;
  float clip = std::numeric_limits<float>::infinity();
  std::vector<Activation> activations;  // perDirection functions for each direction, forward first
};

/// Reads direction, layout, clip and activations; `defaults` are the op's functions for one
/// direction.
RecurrentAttrs parseRecurrentAttrs(const ir::Node& node, const std::vector<std::string>& defaults);

/// Applies an activation to n values in place. Float Tanh and Sigmoid (every step's gates) go
/// through the vector math library, eight lanes at a time.
template <typename Acc>
void activate(const Activation& a, Acc* v, int64_t n) {
  const Acc alpha = a.alpha, beta = a.beta;
  if constexpr (std::is_same_v<Acc, float>) {
    if (a.kind == ActivationKind::kTanh) return applyVectorMath(VectorMathFn::kTanh, v, v, n);
    if (a.kind == ActivationKind::kSigmoid) {
      for (int64_t i = 0; i < n; ++i) v[i] = -v[i];
      applyVectorMath(VectorMathFn::kExp, v, v, n);
      for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / (1.0f + v[i]);
      return;
    }
  }
  switch (a.kind) {
    case ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0 ? v[i] : Acc(0);
      break;
    case ActivationKind::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
      break;
    case ActivationKind::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = Acc(1) / (Acc(1) + std::exp(-v[i]));
      break;
    case ActivationKind::kAffine:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
      break;
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : alpha * v[i];
      break;
    case ActivationKind::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > alpha ? v[i] : Acc(0);
      break;
    case ActivationKind::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * std::tanh(beta * v[i]);
      break;
    case ActivationKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(alpha * v[i] + beta, Acc(0), Acc(1));
      break;
    case ActivationKind::kElu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : alpha * (std::exp(v[i]) - Acc(1));
      break;
    case ActivationKind::kSoftsign:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (Acc(1) + std::fabs(v[i]));
      break;
    case ActivationKind::kSoftplus:
      for (int64_t i = 0; i < n; ++i) v[i] = std::log1p(std::exp(v[i]));
      break;
  }
}

template <typename Acc>
void clipValues(Acc* v, int64_t n, float clip) {
  if (std::isinf(clip)) return;
  const Acc bound = clip;
  for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -bound, bound);
}

/// Sizes of one call, read from X and W with the layout applied.
struct RecurrentDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1, layout = 0;

  int64_t yOffset(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * directions + d) * batch + b : (b * seq + t) * directions + d) *
           hidden;
  }
  int64_t stateOffset(int64_t d, int64_t b) const {
    return (layout == 0 ? d * batch + b : b * directions + d) * hidden;
  }
};

RecurrentDims recurrentDims(KernelContext& ctx, const RecurrentAttrs& attrs, int64_t gates);

/// Number of valid steps of each batch entry (sequence_lens, input 4), seq when absent.
std::vector<int64_t> sequenceLengths(KernelContext& ctx, const RecurrentDims& dims);

struct NoStepHook {
  void operator()(int64_t) const {}
};

/// The recurrence order shared by RNN, GRU and LSTM: for each step s, calls stepBegins(s) and then
/// fn(t, b) for every batch entry b whose sequence is longer than s, where t is the time index s
/// reads (counted back from the entry's own length when reverse). minEntriesPerThread > 0: fn
/// may run for several entries of a step at once on the current thread pool, each thread taking
/// at least that many.
template <typename Fn, typename StepFn = NoStepHook>
void forEachRecurrentStep(const RecurrentDims& dims, const std::vector<int64_t>& lengths,
                          bool reverse, Fn&& fn, StepFn&& stepBegins = {},
                          int64_t minEntriesPerThread = 0) {
  for (int64_t s = 0; s < dims.seq; ++s) {
    stepBegins(s);
    auto entries = [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t len = lengths[static_cast<size_t>(b)];
        if (s < len) fn(reverse ? len - 1 - s : s, b);
      }
    };
    if (minEntriesPerThread > 0)
      parallelForAtLeast(dims.batch, minEntriesPerThread, entries);
    else
      entries(0, dims.batch);
  }
}

template <typename Acc, typename T>
std::vector<Acc> toVector(const T* data, int64_t n) {
  std::vector<Acc> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<Acc>(data[i]);
  return out;
}

/// Rows x cols block of a [rows, cols] matrix, transposed into [cols, rows].
template <typename Acc, typename T>
std::vector<Acc> transposed(const T* m, int64_t rows, int64_t cols) {
  std::vector<Acc> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(c * rows + r)] = static_cast<Acc>(m[r * cols + c]);
  }
  return out;
}

/// out[j] += sum_k v[k] * m[k * ld + j] for j in [0, n): a row vector times a [K, ld] matrix's
/// columns.
template <typename Acc>
void addVectorTimesMatrix(const Acc* v, int64_t k, const Acc* m, int64_t ld, int64_t n, Acc* out) {
  for (int64_t i = 0; i < k; ++i) {
    const Acc vi = v[i];
    const Acc* row = m + i * ld;
    for (int64_t j = 0; j < n; ++j) out[j] += vi * row[j];
  }
}

/// projectInputs for float32 as one SGEMM over every row of X, into out ([seq * batch, n]):
/// op(B) is W^T ([input, n]); B is W as the op gives it ([n, input], transB) or already
/// transposed, with row stride ldb. `workspace` holds recurrentWorkspaceBytes(dims, n, ...) bytes.
void projectInputsSgemm(const float* x, const RecurrentDims& dims, const float* b, bool transB,
                        int64_t ldb, const std::vector<float>& bias, float* out, void* workspace);

/// projectInputsSgemm with W^T packed when the kernel was made (PackedRecurrentWeights).
void projectInputsSgemm(const float* x, const RecurrentDims& dims, const PackedMatrix& wt,
                        const std::vector<float>& bias, float* out, void* workspace);

/// Bytes of the input projection's output ([seq * batch, n] floats) in whole cache lines, for a
/// kernel that keeps it at the start of its workspace, before its products' scratch.
uint64_t projectionBytes(const RecurrentDims& dims, int64_t n);

/// Scratch bytes of a float recurrent op's products on `threads` threads: the input projection
/// (n columns) and each step's BatchRecurrentProduct (cols columns; 0: none), which run one after
/// the other in one workspace; enough with the weights packed or not.
uint64_t recurrentWorkspaceBytes(const RecurrentDims& dims, int64_t n, int64_t cols, int threads);

/// The workspace of a recurrent kernel with `gates` gates whose step product has
/// colsPerHidden * hidden columns (0: none), for X, W and R of the shapes given; none for double.
/// projectionFirst: projectionBytes more, for the input projection's output.
WorkspaceFn recurrentWorkspace(const RecurrentAttrs& attrs, int64_t gates, int64_t colsPerHidden,
                               DataType dtype, bool projectionFirst = false);

/// Each step's h x R^T for the whole batch in one SGEMM ([batch, cols]), instead of one row at a
/// time. op(B) is R^T's first `cols` columns ([hidden, cols]); B is R as the op gives it (transB)
/// or already transposed, with row stride ldb. Packed once when the batch has more than one entry
/// (a product with several rows would pack it on every step); one row is a matrix-vector product.
class BatchRecurrentProduct {
 public:
  BatchRecurrentProduct(const float* b, bool transB, int64_t ldb, int64_t batch, int64_t hidden,
                        int64_t cols);
  /// With R^T packed when the kernel was made (PackedRecurrentWeights::r): one row included.
  BatchRecurrentProduct(const PackedMatrix& rt, int64_t batch);
  /// Scratch bytes of multiply on `threads` threads.
  static uint64_t workspaceBytes(int64_t batch, int64_t hidden, int64_t cols, int threads);
  /// Multiplies the batch's hidden state ([batch, hidden]) by R^T, packing into `workspace`
  /// (workspaceBytes for the pool's threads).
  void multiply(const float* hState, void* workspace);
  /// Batch entry b's row of the last product.
  const float* row(int64_t b) const { return &product_[static_cast<size_t>(b * cols_)]; }

 private:
  const float* b_;
  bool transB_;
  int64_t ldb_, batch_, hidden_, cols_;
  PackedMatrix packed_;
  std::vector<float> product_;
};

/// The input projection of every time step: out[t, b, :] = X[t, b, :] * W^T + bias, with X in the
/// op's layout and wt = W^T ([input, n]). Done once before the recurrence.
/// float32 runs on SGEMM in `workspace` (recurrentWorkspaceBytes); other types need none.
template <typename Acc, typename T>
std::vector<Acc> projectInputs(const T* x, const RecurrentDims& dims, const std::vector<Acc>& wt,
                               const std::vector<Acc>& bias, void* workspace) {
  const int64_t n = static_cast<int64_t>(bias.size());
  std::vector<Acc> out(static_cast<size_t>(dims.seq * dims.batch * n));
  if constexpr (std::is_same_v<Acc, float> && std::is_same_v<T, float>) {
    projectInputsSgemm(x, dims, wt.data(), false, n, bias, out.data(), workspace);
    return out;
  }
  std::vector<Acc> row(static_cast<size_t>(dims.input));
  for (int64_t t = 0; t < dims.seq; ++t) {
    for (int64_t b = 0; b < dims.batch; ++b) {
      const T* xr = x + (dims.layout == 0 ? t * dims.batch + b : b * dims.seq + t) * dims.input;
      for (int64_t i = 0; i < dims.input; ++i)
        row[static_cast<size_t>(i)] = static_cast<Acc>(xr[i]);
      Acc* o = &out[static_cast<size_t>((t * dims.batch + b) * n)];
      std::copy(bias.begin(), bias.end(), o);
      addVectorTimesMatrix(row.data(), dims.input, wt.data(), n, n, o);
    }
  }
  return out;
}

/// The initial state (initial_h or initial_c) of direction d as [batch, hidden], zeros when
/// omitted.
template <typename Acc, typename T>
std::vector<Acc> initialState(KernelContext& ctx, size_t input, const RecurrentDims& dims,
                              int64_t d) {
  std::vector<Acc> state(static_cast<size_t>(dims.batch * dims.hidden), Acc(0));
  if (!ctx.hasInput(input)) return state;
  const Tensor& t = ctx.input(input);
  Shape expected = dims.layout == 0 ? Shape{dims.directions, dims.batch, dims.hidden}
                                    : Shape{dims.batch, dims.directions, dims.hidden};
  if (t.shape() != expected)
    ctx.fail("initial state has shape " + shapeToString(t.shape()) + ", expected " +
             shapeToString(expected));
  const T* data = t.data<T>();
  for (int64_t b = 0; b < dims.batch; ++b) {
    const T* src = data + dims.stateOffset(d, b);
    for (int64_t j = 0; j < dims.hidden; ++j)
      state[static_cast<size_t>(b * dims.hidden + j)] = static_cast<Acc>(src[j]);
  }
  return state;
}

/// Writes a direction's final state ([batch, hidden]) into output i if the graph wants it.
/// Entries with an empty sequence get zeros, as onnxruntime does.
template <typename Acc, typename T>
void writeState(KernelContext& ctx, size_t output, const RecurrentDims& dims, int64_t d,
                const std::vector<int64_t>& lengths, const std::vector<Acc>& state) {
  if (!ctx.wantsOutput(output)) return;
  T* out = ctx.output(output).data<T>();
  for (int64_t b = 0; b < dims.batch; ++b) {
    T* dst = out + dims.stateOffset(d, b);
    bool empty = lengths[static_cast<size_t>(b)] == 0;
    for (int64_t j = 0; j < dims.hidden; ++j) {
      dst[j] = empty ? T(0.0f) : static_cast<T>(state[static_cast<size_t>(b * dims.hidden + j)]);
    }
  }
}

/// Y for this call (null when not wanted), zero-filled so that steps past a sequence's length stay
/// 0.
template <typename T>
T* outputSequence(KernelContext& ctx) {
  if (!ctx.wantsOutput(0)) return nullptr;
  Tensor& y = ctx.output(0);
  T* data = y.data<T>();
  std::fill(data, data + y.numel(), T(0.0f));
  return data;
}

/// Float32 W and R of every direction packed once, when the kernel is made: W^T ([input,
/// gates * hidden]) for the input projection and R^T's first colsPerHidden * hidden columns
/// ([hidden, cols]) for each step's product, so no run packs or transposes them. Empty unless
/// W and R are constant float32 tensors of matching shapes (which recurrentDims checks against
/// X at run time, so they fit every run).
struct PackedRecurrentWeights {
  std::vector<PackedMatrix> w, r;  // per direction
  bool empty() const { return w.empty(); }
};

/// Packs W (input 1) and R (input 2) of a kernel being made, for `gates` gates; says the kernel
/// keeps its own copy of both when it does (kernel.h: keepsOwnCopyOf).
PackedRecurrentWeights packRecurrentWeights(const KernelCreateInfo& info, int64_t gates,
                                            int64_t colsPerHidden);

/// Weights of direction d: W^T, R^T and the two bias halves (Wb, Rb), as Acc.
template <typename Acc>
struct DirectionWeights {
  std::vector<Acc> wt;  // [input, gates * hidden]
  std::vector<Acc> rt;  // [hidden, gates * hidden]
  std::vector<Acc> wb;  // [gates * hidden]
  std::vector<Acc> rb;  // [gates * hidden]
};

/// Direction d's two bias halves (Wb, Rb) of input B ([directions, 2 * gates * hidden]), zeros
/// when B is omitted.
template <typename Acc, typename T>
void directionBiases(KernelContext& ctx, const RecurrentDims& dims, int64_t gates, int64_t d,
                     std::vector<Acc>& wb, std::vector<Acc>& rb) {
  const int64_t n = gates * dims.hidden;
  wb.assign(static_cast<size_t>(n), Acc(0));
  rb.assign(static_cast<size_t>(n), Acc(0));
  if (!ctx.hasInput(3)) return;
  const Tensor& b = ctx.input(3);
  if (b.shape() != Shape{dims.directions, 2 * n}) {
    ctx.fail("B has shape " + shapeToString(b.shape()) + ", expected " +
             shapeToString({dims.directions, 2 * n}));
  }
  const T* bias = b.data<T>() + d * 2 * n;
  wb = toVector<Acc>(bias, n);
  rb = toVector<Acc>(bias + n, n);
}

template <typename Acc, typename T>
DirectionWeights<Acc> directionWeights(KernelContext& ctx, const RecurrentDims& dims, int64_t gates,
                                       int64_t d) {
  const int64_t n = gates * dims.hidden;
  DirectionWeights<Acc> w;
  w.wt = transposed<Acc>(ctx.input(1).data<T>() + d * n * dims.input, n, dims.input);
  w.rt = transposed<Acc>(ctx.input(2).data<T>() + d * n * dims.hidden, n, dims.hidden);
  directionBiases<Acc, T>(ctx, dims, gates, d, w.wb, w.rb);
  return w;
}

/// Calls fn(TypeTag<T>, TypeTag<Acc>) for the float types: Acc is double for double, float
/// otherwise.
template <typename Fn>
void dispatchRecurrent(DataType type, const char* what, Fn&& fn) {
  dispatchFloat(type, what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    fn(tag, TypeTag<Acc>{});
  });
}

}  // namespace kiln::cpu::rnn
