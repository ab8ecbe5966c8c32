// CPU kernel of com.microsoft AttnLSTM (ir/ops/contrib_attn_lstm.cpp), float32: the LSTM
// recurrence of ONNX LSTM (lstm_recurrence.h) with products that add, at every step, the
// attention state times W's attention columns. The attention state is zeros before the first
// step; after each step it is, per batch entry, Bahdanau's context of the step's output h:
//   keys = M x MW (once), q = h x QW, score[s] = sum_i V[i] tanh(keys[s, i] + q[i]) over the
//   entry's memory_seq_lens steps, align = exp(score) / sum (no max subtracted, the sum in double,
//   as onnxruntime computes it), context = align x M,
// passed through the attention layer (h x AW[:hidden] + context x AW[hidden:]) when AW is given.
#include <cmath>
#include <optional>

#include "backends/cpu/kernels/lstm_recurrence.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

using namespace rnn;

struct AttnDims {
  int64_t steps = 0, depth = 0, attn = 0, layer = 0;          // layer: AW's width, 0 without AW
  int64_t size() const { return layer > 0 ? layer : depth; }  // the attention state's width
};

// Checks the shapes as onnxruntime does, naming the input and both shapes when one differs.
void expectShape(const KernelContext& ctx, size_t i, const char* name, const Shape& want) {
  if (ctx.input(i).shape() != want)
    ctx.fail(std::string(name) + " has shape " + shapeToString(ctx.input(i).shape()) +
                 ", expected " + shapeToString(want),
             ErrorCode::kInvalidArgument);
}

class AttnLstmProducts {
 public:
  AttnLstmProducts(KernelContext& ctx, const RecurrentDims& dims, const AttnDims& a)
      : ctx_(ctx), dims_(dims), a_(a), stride_(dims.input + a.size()) {
    const int64_t n = 4 * dims.hidden, threads = poolThreads();
    uint64_t bytes = recurrentWorkspaceBytes(dims, n, n, static_cast<int>(threads));
    bytes = std::max(bytes, BatchRecurrentProduct::workspaceBytes(dims.batch, a.size(), n,
                                                                  static_cast<int>(threads)));
    bytes = std::max(bytes, sgemmWorkspaceBytes(dims.batch * a.steps, a.attn, a.depth,
                                                static_cast<int>(threads)));
    bytes = std::max(
        bytes, sgemmWorkspaceBytes(dims.batch, std::max(a.attn, a.layer),
                                   std::max(dims.hidden, a.depth), static_cast<int>(threads)));
    workspace_ = ctx.workspace(bytes);
    memoryLengths_.assign(static_cast<size_t>(dims.batch), a.steps);
    if (ctx.hasInput(12)) {
      const Tensor& lens = ctx.input(12);
      if (lens.numel() != dims.batch)
        ctx.fail("memory_seq_lens has " + std::to_string(lens.numel()) + " values, expected " +
                     std::to_string(dims.batch),
                 ErrorCode::kInvalidArgument);
      for (int64_t b = 0; b < dims.batch; ++b) {
        const int64_t len = lens.intAt(b);
        if (len <= 0 || len > a.steps)
          ctx.fail("memory_seq_lens[" + std::to_string(b) + "] = " + std::to_string(len) +
                       " is outside (0, " + std::to_string(a.steps) + "]",
                   ErrorCode::kInvalidArgument);
        memoryLengths_[static_cast<size_t>(b)] = len;
      }
    }
  }

  void setDirection(int64_t d) {
    const int64_t n = 4 * dims_.hidden, h = dims_.hidden;
    w_ = ctx_.input(1).data<float>() + d * n * stride_;
    recurrent_.emplace(ctx_.input(2).data<float>() + d * n * h, true, h, dims_.batch, h, n);
    attention_.emplace(w_ + dims_.input, true, stride_, dims_.batch, a_.size(), n);
    qw_ = ctx_.input(8).data<float>() + d * h * a_.attn;
    v_ = ctx_.input(10).data<float>() + d * a_.attn;
    aw_ = a_.layer > 0 ? ctx_.input(13).data<float>() + d * (h + a_.depth) * a_.layer : nullptr;
    // keys = M x MW for every memory step of every entry.
    keys_.resize(static_cast<size_t>(dims_.batch * a_.steps * a_.attn));
    sgemm(false, false, dims_.batch * a_.steps, a_.attn, a_.depth, 1.0f,
          ctx_.input(11).data<float>(), a_.depth,
          ctx_.input(9).data<float>() + d * a_.depth * a_.attn, a_.attn, 0.0f, keys_.data(),
          a_.attn, workspace_);
    state_.assign(static_cast<size_t>(dims_.batch * a_.size()), 0.0f);
    firstStep_ = true;
  }

  const float* projectInputs(const std::vector<float>& bias) {
    xw_.resize(static_cast<size_t>(dims_.seq * dims_.batch) * bias.size());
    projectInputsSgemm(ctx_.input(0).data<float>(), dims_, w_, true, stride_, bias, xw_.data(),
                       workspace_);
    return xw_.data();
  }

  // hState holds every entry's output of the previous step (the initial state before the first
  // step, where the attention state stays zeros).
  void stepBegins(const std::vector<float>& hState, const std::vector<bool>&) {
    if (!firstStep_) attend(hState);
    firstStep_ = false;
    recurrent_->multiply(hState.data(), workspace_);
    attention_->multiply(state_.data(), workspace_);
  }

  static constexpr bool kEntriesInParallel = true;  // addRecurrent only reads
  void addRecurrent(int64_t b, const float*, float* gates) const {
    const float* r = recurrent_->row(b);
    const float* a = attention_->row(b);
    for (int64_t j = 0; j < 4 * dims_.hidden; ++j) gates[j] += r[j] + a[j];
  }

 private:
  void attend(const std::vector<float>& h) {
    const int64_t batch = dims_.batch, hidden = dims_.hidden, A = a_.attn;
    std::vector<float> query(static_cast<size_t>(batch * A));
    sgemm(false, false, batch, A, hidden, 1.0f, h.data(), hidden, qw_, A, 0.0f, query.data(), A,
          workspace_);
    std::vector<float> context(static_cast<size_t>(batch * a_.depth), 0.0f);
    std::vector<float> align(static_cast<size_t>(a_.steps));
    const float* memory = ctx_.input(11).data<float>();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t steps = memoryLengths_[static_cast<size_t>(b)];
      const float* q = query.data() + b * A;
      double sum = 0;
      for (int64_t s = 0; s < steps; ++s) {
        const float* k = keys_.data() + (b * a_.steps + s) * A;
        float score = 0;
        for (int64_t i = 0; i < A; ++i) score += v_[i] * std::tanh(k[i] + q[i]);
        align[static_cast<size_t>(s)] = std::exp(score);
        sum += align[static_cast<size_t>(s)];
      }
      for (int64_t s = 0; s < steps; ++s)
        align[static_cast<size_t>(s)] =
            sum == 0.0 ? static_cast<float>(1.0 / static_cast<double>(steps))
                       : static_cast<float>(align[static_cast<size_t>(s)] / sum);
      float* c = context.data() + b * a_.depth;
      for (int64_t s = 0; s < steps; ++s) {
        const float* m = memory + (b * a_.steps + s) * a_.depth;
        for (int64_t j = 0; j < a_.depth; ++j) c[j] += align[static_cast<size_t>(s)] * m[j];
      }
    }
    if (!aw_) {
      state_ = std::move(context);
      return;
    }
    const int64_t L = a_.layer;
    sgemm(false, false, batch, L, hidden, 1.0f, h.data(), hidden, aw_, L, 0.0f, state_.data(), L,
          workspace_);
    sgemm(false, false, batch, L, a_.depth, 1.0f, context.data(), a_.depth, aw_ + hidden * L, L,
          1.0f, state_.data(), L, workspace_);
  }

  KernelContext& ctx_;
  const RecurrentDims& dims_;
  AttnDims a_;
  int64_t stride_;  // W's row length: input + attention state
  void* workspace_ = nullptr;
  std::vector<int64_t> memoryLengths_;
  const float *w_ = nullptr, *qw_ = nullptr, *v_ = nullptr, *aw_ = nullptr;
  std::optional<BatchRecurrentProduct> recurrent_, attention_;
  std::vector<float> keys_, state_, xw_;  // xw_: the input projection
  bool firstStep_ = true;
};

void attnLstmKernel(KernelContext& ctx, const RecurrentAttrs& attrs, bool inputForget) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32)
    ctx.fail("X must be float32, got " + dataTypeName(x.dtype()), ErrorCode::kUnsupportedNode);
  if (x.rank() != 3 || ctx.input(2).rank() != 3 || ctx.input(11).rank() != 3)
    ctx.fail(
        "X [seq, batch, input], R [D, 4 * hidden, hidden] and M [batch, steps, depth] "
        "expected, got " +
            x.describe() + ", " + ctx.input(2).describe() + " and " + ctx.input(11).describe(),
        ErrorCode::kInvalidArgument);
  RecurrentDims dims;
  dims.directions = attrs.directions;
  dims.seq = x.dim(0);
  dims.batch = x.dim(1);
  dims.input = x.dim(2);
  dims.hidden = ctx.input(2).dim(2);
  const Tensor& m = ctx.input(11);
  AttnDims a{m.dim(1), m.dim(2), ctx.input(9).rank() == 3 ? ctx.input(9).dim(2) : 0,
             ctx.hasInput(13) && ctx.input(13).rank() == 3 ? ctx.input(13).dim(2) : 0};
  const int64_t D = dims.directions, h = dims.hidden;
  expectShape(ctx, 11, "M", {dims.batch, a.steps, a.depth});
  expectShape(ctx, 9, "MW", {D, a.depth, a.attn});
  expectShape(ctx, 8, "QW", {D, h, a.attn});
  expectShape(ctx, 10, "V", {D, a.attn});
  if (ctx.hasInput(13)) expectShape(ctx, 13, "AW", {D, h + a.depth, a.layer});
  expectShape(ctx, 1, "W", {D, 4 * h, dims.input + a.size()});
  expectShape(ctx, 2, "R", {D, 4 * h, h});
  AttnLstmProducts products(ctx, dims, a);
  runLstmRecurrence<float, float>(ctx, attrs, inputForget, dims, products);
}

struct AttnLstmAttrs {
  RecurrentAttrs rnn;
  bool inputForget = false;
};

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "AttnLSTM",
                                bindKernel(
                                    [](const ir::Node& node) {
                                      return AttnLstmAttrs{
                                          parseRecurrentAttrs(node, {"Sigmoid", "Tanh", "Tanh"}),
                                          ir::attrInt(node, "input_forget", 0) != 0};
                                    },
                                    [](KernelContext& ctx, const AttnLstmAttrs& a) {
                                      attnLstmKernel(ctx, a.rnn, a.inputForget);
                                    }));

}  // namespace kiln::cpu
