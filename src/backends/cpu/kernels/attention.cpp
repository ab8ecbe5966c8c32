// CPU kernel of Attention (opsets 23+): softmax(Q K^T * scale + bias) V per batch and query head,
// with grouped key/value heads, a past key/value cache, and a bias that sums the attention mask
// (bool: false -> -inf; shorter than the key length: padded with -inf), the causal mask
// (key j visible from query i iff j <= i + offset), the sliding window and the key padding given
// by nonpad_kv_seqlen. Rows with every key masked give zeros. Computed in double.
#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/kernels/elementwise_util.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// A (B, H, L, D) view of a 4-D tensor or of a 3-D (B, L, H * D) one, read as doubles.
struct HeadView {
  std::vector<double> values;
  int64_t heads = 0, length = 0, dim = 0;
  bool fourD = true;
  double at(int64_t b, int64_t h, int64_t l, int64_t d) const {
    return values[fourD ? ((b * heads + h) * length + l) * dim + d
                        : ((b * length + l) * heads + h) * dim + d];
  }
};

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.doubleAt(static_cast<int64_t>(i));
  return v;
}

HeadView headView(KernelContext& ctx, const Tensor& t, int64_t headsAttr, const char* name) {
  HeadView v;
  v.values = doubles(t);
  v.fourD = t.rank() == 4;
  if (v.fourD) {
    v.heads = t.dim(1), v.length = t.dim(2), v.dim = t.dim(3);
  } else {
    if (headsAttr <= 0 || t.dim(2) % headsAttr != 0)
      ctx.fail(std::string(name) + " " + t.describe() + " does not split into the given heads",
               ErrorCode::kInvalidArgument);
    v.heads = headsAttr, v.length = t.dim(1), v.dim = t.dim(2) / headsAttr;
  }
  return v;
}

/// The attention mask broadcast (right-aligned) to (B, Hq, S, maskLength).
struct MaskView {
  const Tensor* mask = nullptr;
  std::vector<int64_t> strides;  // per (b, h, i, j); 0 where the mask's dim is 1 or missing
  int64_t length = 0;
  double at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (j >= length) return kNegInf;  // a mask shorter than the keys hides the rest
    const int64_t off = b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3];
    if (mask->dtype() == DataType::kBool) return mask->data<bool>()[off] ? 0.0 : kNegInf;
    return mask->doubleAt(off);
  }
};

template <typename T>
T toType(double v) {
  return static_cast<T>(static_cast<ComputeType<T>>(v));
}

// The attributes, read once when the kernel is made.
struct AttentionAttrs {
  int64_t qHeads = 0, kvHeads = 0;
  bool causal = false;
  int64_t left = -1, right = -1;
  double softcap = 0.0;
  int64_t qkMode = 0;
  std::optional<double> scale;  // default 1 / sqrt(head size)
};

AttentionAttrs attentionAttrs(const ir::Node& node) {
  AttentionAttrs a;
  a.qHeads = ir::attrInt(node, "q_num_heads", 0);
  a.kvHeads = ir::attrInt(node, "kv_num_heads", 0);
  a.causal = ir::attrInt(node, "is_causal", 0) != 0;
  a.left = ir::attrInt(node, "left_window_size", -1);
  a.right = ir::attrInt(node, "right_window_size", -1);
  a.softcap = ir::attrFloat(node, "softcap", 0.0f);
  a.qkMode = ir::attrInt(node, "qk_matmul_output_mode", 0);
  if (ir::hasAttr(node, "scale")) a.scale = ir::attrFloat(node, "scale");
  return a;
}

void attentionKernel(KernelContext& ctx, const AttentionAttrs& attrs) {
  const Tensor& qT = ctx.input(0);
  const Tensor& kT = ctx.input(1);
  const Tensor& vT = ctx.input(2);
  const Tensor* maskT = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const Tensor* pastK = ctx.hasInput(4) ? &ctx.input(4) : nullptr;
  const Tensor* pastV = ctx.hasInput(5) ? &ctx.input(5) : nullptr;
  const Tensor* nonpad = ctx.hasInput(6) ? &ctx.input(6) : nullptr;
  if ((pastK == nullptr) != (pastV == nullptr))
    ctx.fail("past_key and past_value must be given together", ErrorCode::kInvalidModel);
  if (nonpad && pastK)
    ctx.fail("nonpad_kv_seqlen cannot be combined with a past cache", ErrorCode::kInvalidModel);
  if (qT.rank() != kT.rank() || qT.rank() != vT.rank() || (qT.rank() != 3 && qT.rank() != 4)) {
    ctx.fail("Q, K and V must all be 3-D or all 4-D", ErrorCode::kInvalidArgument);
  }
  const HeadView q = headView(ctx, qT, attrs.qHeads, "Q");
  const HeadView k = headView(ctx, kT, attrs.kvHeads, "K");
  const HeadView v = headView(ctx, vT, attrs.kvHeads, "V");
  const int64_t batches = qT.dim(0), qHeads = q.heads, kvHeads = k.heads, seq = q.length,
                dk = k.dim, dv = v.dim;
  if (kvHeads == 0 || qHeads % kvHeads != 0 || v.heads != kvHeads || q.dim != dk ||
      k.length != v.length) {
    ctx.fail("Q " + qT.describe() + ", K " + kT.describe() + " and V " + vT.describe() +
                 " do not fit together",
             ErrorCode::kInvalidArgument);
  }
  const int64_t past = pastK ? pastK->dim(2) : 0, total = past + k.length;
  if (pastK && (pastK->shape() != Shape{batches, kvHeads, past, dk} ||
                pastV->shape() != Shape{batches, kvHeads, past, dv})) {
    ctx.fail("past_key " + pastK->describe() + " / past_value " + pastV->describe() +
                 " must be (B, Hkv, P, D)",
             ErrorCode::kInvalidArgument);
  }
  // The present cache: past followed by the new keys/values, (B, Hkv, total, D).
  std::vector<double> keys(static_cast<size_t>(batches * kvHeads * total * dk)),
      values(static_cast<size_t>(batches * kvHeads * total * dv));
  const std::vector<double> pk = pastK ? doubles(*pastK) : std::vector<double>{},
                            pv = pastV ? doubles(*pastV) : std::vector<double>{};
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t h = 0; h < kvHeads; ++h) {
      for (int64_t t = 0; t < total; ++t) {
        for (int64_t d = 0; d < dk; ++d)
          keys[((b * kvHeads + h) * total + t) * dk + d] =
              t < past ? pk[((b * kvHeads + h) * past + t) * dk + d] : k.at(b, h, t - past, d);
        for (int64_t d = 0; d < dv; ++d)
          values[((b * kvHeads + h) * total + t) * dv + d] =
              t < past ? pv[((b * kvHeads + h) * past + t) * dv + d] : v.at(b, h, t - past, d);
      }
    }
  }
  MaskView mask;
  if (maskT) {
    if (maskT->rank() < 1 || maskT->rank() > 4)
      ctx.fail("attn_mask must have rank 1 to 4", ErrorCode::kInvalidArgument);
    const Shape full{batches, qHeads, seq, maskT->shape().back()};
    mask.mask = maskT;
    mask.length = maskT->shape().back();
    mask.strides.assign(4, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < maskT->rank(); ++i) {
      const size_t md = maskT->rank() - 1 - i, fd = 3 - i;
      const int64_t dim = maskT->dim(md);
      if (dim != 1 && dim != full[fd])
        ctx.fail("attn_mask " + maskT->describe() + " does not broadcast to the scores",
                 ErrorCode::kInvalidArgument);
      mask.strides[fd] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
    if (mask.length > total)
      ctx.fail("attn_mask is longer than the keys", ErrorCode::kInvalidArgument);
  }
  std::vector<int64_t> visible;  // nonpad_kv_seqlen per batch
  if (nonpad) {
    visible = nonpad->toInt64Vector();
    if (static_cast<int64_t>(visible.size()) != batches)
      ctx.fail("nonpad_kv_seqlen must hold one length per batch", ErrorCode::kInvalidArgument);
  }
  const bool causal = attrs.causal;
  const int64_t left = attrs.left, right = attrs.right;
  const double softcap = attrs.softcap;
  const int64_t qkMode = attrs.qkMode;
  const double scale = attrs.scale ? *attrs.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  const double rootScale = std::sqrt(scale);  // applied to Q and K each, as the reference does

  Tensor& y = ctx.allocateOutput(
      0, qT.dtype(), q.fourD ? Shape{batches, qHeads, seq, dv} : Shape{batches, seq, qHeads * dv});
  Tensor* qkOut = ctx.wantsOutput(3)
                      ? &ctx.allocateOutput(3, qT.dtype(), {batches, qHeads, seq, total})
                      : nullptr;
  std::vector<double> bias(static_cast<size_t>(total)), scores(static_cast<size_t>(total)),
      probs(static_cast<size_t>(total));
  dispatchFloat(qT.dtype(), "Attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto round = [](double x) {
      return static_cast<double>(static_cast<ComputeType<T>>(toType<T>(x)));
    };
    T* py = y.data<T>();
    const double rs = round(rootScale);
    for (int64_t b = 0; b < batches; ++b) {
      // Causal and window positions are relative to the query's absolute position i + offset.
      const int64_t offset = nonpad ? visible[b] - seq : past;
      for (int64_t h = 0; h < qHeads; ++h) {
        const int64_t kvh = h / (qHeads / kvHeads);
        for (int64_t i = 0; i < seq; ++i) {
          bool anyVisible = false;
          for (int64_t j = 0; j < total; ++j) {
            double bj = maskT ? mask.at(b, h, i, j) : 0.0;
            if (causal && j > i + offset) bj = kNegInf;
            const int64_t diff = i + offset - j;
            if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) bj = kNegInf;
            if (nonpad && j >= visible[b]) bj = kNegInf;
            bias[j] = bj;
            anyVisible = anyVisible || bj != kNegInf;
            double dot = 0;
            for (int64_t d = 0; d < dk; ++d)
              dot += round(q.at(b, h, i, d) * rs) *
                     round(keys[((b * kvHeads + kvh) * total + j) * dk + d] * rs);
            if (softcap > 0) dot = softcap * std::tanh(dot / softcap);
            scores[j] = dot;
          }
          double maxv = kNegInf;
          for (int64_t j = 0; j < total; ++j) maxv = std::max(maxv, scores[j] + bias[j]);
          if (maxv == kNegInf) maxv = 0;
          double sum = 0;
          for (int64_t j = 0; j < total; ++j)
            sum += probs[j] = std::exp(scores[j] + bias[j] - maxv);
          if (sum == 0) sum = 1;
          for (int64_t j = 0; j < total; ++j) probs[j] = anyVisible ? round(probs[j] / sum) : 0.0;
          if (qkOut) {
            T* row = qkOut->data<T>() + ((b * qHeads + h) * seq + i) * total;
            for (int64_t j = 0; j < total; ++j)
              row[j] = toType<T>(qkMode == 3   ? probs[j]
                                 : qkMode == 2 ? scores[j] + bias[j]
                                               : scores[j]);
          }
          for (int64_t m = 0; m < dv; ++m) {
            double acc = 0;
            for (int64_t j = 0; j < total; ++j)
              acc += probs[j] * values[((b * kvHeads + kvh) * total + j) * dv + m];
            py[q.fourD ? ((b * qHeads + h) * seq + i) * dv + m
                       : ((b * seq + i) * qHeads + h) * dv + m] = toType<T>(acc);
          }
        }
      }
    }
    if (ctx.wantsOutput(1)) {
      T* p = ctx.allocateOutput(1, qT.dtype(), {batches, kvHeads, total, dk}).template data<T>();
      for (size_t i = 0; i < keys.size(); ++i) p[i] = toType<T>(keys[i]);
    }
    if (ctx.wantsOutput(2)) {
      T* p = ctx.allocateOutput(2, qT.dtype(), {batches, kvHeads, total, dv}).template data<T>();
      for (size_t i = 0; i < values.size(); ++i) p[i] = toType<T>(values[i]);
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Attention", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
                           return [attrs = attentionAttrs(info.node)](KernelContext& ctx) {
                             attentionKernel(ctx, attrs);
                           };
                         }));

}  // namespace
}  // namespace kiln::cpu
