// CPU kernels of com.microsoft MoE and QMoE (ir/ops/contrib_moe.cpp), as onnxruntime's CPU kernels
// compute them: each token's router row softmaxed, its top k experts taken (ties to the higher
// expert index), their weights renormalized over the k when normalize_routing_weights says so
// (QMoE: always, as onnxruntime's CPU QMoE does); then per expert, on the rows of the tokens routed
// to it, fc1 (+ bias), the activation, fc2 (+ bias), each an SGEMM against the expert's [out, in]
// weights, and the rows added to the output times their routing weights, expert by expert. QMoE
// dequantizes an expert's weights when a token is routed to it, into scratch of one expert's size.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/gelu_functions.h"
#include "core/half.h"

namespace kiln::cpu {
namespace {

enum class MoEActivation { kRelu, kGelu, kSilu, kIdentity, kSwiglu };

constexpr size_t kNone = static_cast<size_t>(-1);

// Where one projection's tensors are among the node's inputs (kNone: the op has no such input).
struct ProjectionInputs {
  size_t weights, scales, bias, zeros;
};

struct MoEParams {
  bool quantized = false;
  int64_t k = 1;
  bool normalize = false;
  MoEActivation activation = MoEActivation::kRelu;
  float alpha = 1.0f, beta = 0.0f, limit = std::numeric_limits<float>::infinity();
  int64_t fusion = 0;              // swiglu's gate / linear layout in fc1
  int64_t bits[3] = {32, 32, 32};  // of fc1, fc2, fc3 (32: float weights)
  int64_t blockSize = 0;           // 0: one scale per output row
  ProjectionInputs inputs[3];
  size_t routerWeights = kNone;
};

// A tensor's values as float32 (float32, float16 or bfloat16).
std::vector<float> floatValues(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DataType::kFloat32:
        out[i] = t.data<float>()[i];
        break;
      case DataType::kFloat16:
        out[i] = halfBitsToFloat(t.data<uint16_t>()[i]);
        break;
      default:
        out[i] = bfloat16BitsToFloat(t.data<uint16_t>()[i]);
        break;
    }
  }
  return out;
}

int32_t packedValue(const uint8_t* row, int64_t e, int64_t bits) {
  const int64_t perByte = 8 / bits;
  return (row[e / perByte] >> ((e % perByte) * bits)) & ((1 << bits) - 1);
}

// One projection (fc1, fc2 or fc3) of every expert, its shapes checked against the node's tensors.
class Projection {
 public:
  Projection(const KernelContext& ctx, const MoEParams& p, const ProjectionInputs& in,
             const char* name, int64_t experts, int64_t out, int64_t inner, int64_t bits)
      : name_(name), out_(out), in_(inner), bits_(bits), blockSize_(p.blockSize) {
    const Tensor& w = ctx.input(in.weights);
    if (bits != 32 && inner % (8 / bits) != 0) {  // rows of whole bytes
      ctx.fail(std::string(name) + " has " + std::to_string(inner) + " input features, not a " +
                   "multiple of " + std::to_string(8 / bits) + " (" + std::to_string(bits) +
                   "-bit weights packed in whole bytes per row)",
               ErrorCode::kInvalidArgument);
    }
    const int64_t packedIn = bits == 32 ? inner : inner / (8 / bits);
    expect(ctx, w, "_experts_weights", {experts, out, packedIn});
    weights_ = &w;
    if (in.bias != kNone && ctx.hasInput(in.bias)) {
      expect(ctx, ctx.input(in.bias), "_experts_bias", {experts, out});
      bias_ = floatValues(ctx.input(in.bias));
    }
    if (bits == 32) return;
    if (blockSize_ != 0 && inner % blockSize_ != 0) {
      ctx.fail(std::string(name) + " has " + std::to_string(inner) +
                   " input features, not a multiple of block_size " + std::to_string(blockSize_),
               ErrorCode::kInvalidArgument);
    }
    const int64_t blocks = blockSize_ == 0 ? 1 : inner / blockSize_;
    if (!ctx.hasInput(in.scales))
      ctx.fail(std::string(name) + "_scales is required", ErrorCode::kInvalidModel);
    const Tensor& s = ctx.input(in.scales);
    expect(ctx, s, "_scales", blockSize_ == 0 ? Shape{experts, out} : Shape{experts, out, blocks});
    scales_ = floatValues(s);
    if (ctx.hasInput(in.zeros)) {
      zeros_ = &ctx.input(in.zeros);
      expect(ctx, *zeros_, "_zero_points",
             blockSize_ == 0 ? Shape{experts, (out * bits + 7) / 8}
                             : Shape{experts, out, (blocks * bits + 7) / 8});
    }
  }

  int64_t out() const { return out_; }
  int64_t in() const { return in_; }
  const float* bias(int64_t e) const { return bias_.empty() ? nullptr : bias_.data() + e * out_; }

  // Expert e's [out, in] weights: the weights themselves (float), or dequantized into `scratch`.
  const float* expert(int64_t e, std::vector<float>& scratch) const {
    if (bits_ == 32) return weights_->data<float>() + e * out_ * in_;
    scratch.resize(static_cast<size_t>(out_ * in_));
    const int64_t rowBytes = in_ / (8 / bits_);
    const int64_t blocks = blockSize_ == 0 ? 1 : in_ / blockSize_;
    const float defaultZero = static_cast<float>(1 << (bits_ - 1));
    for (int64_t n = 0; n < out_; ++n) {
      const uint8_t* q = weights_->data<uint8_t>() + (e * out_ + n) * rowBytes;
      const float* s = scales_.data() + (e * out_ + n) * blocks;
      for (int64_t j = 0; j < in_; ++j) {
        const int64_t b = blockSize_ == 0 ? 0 : j / blockSize_;
        float zero = defaultZero;
        if (zeros_ && blockSize_ == 0) {
          zero = static_cast<float>(
              packedValue(zeros_->data<uint8_t>() + e * ((out_ * bits_ + 7) / 8), n, bits_));
        } else if (zeros_) {
          const int64_t rowZeroBytes = (blocks * bits_ + 7) / 8;
          zero = static_cast<float>(
              packedValue(zeros_->data<uint8_t>() + (e * out_ + n) * rowZeroBytes, b, bits_));
        }
        const float value = static_cast<float>(bits_ == 8 ? q[j] : packedValue(q, j, bits_));
        scratch[static_cast<size_t>(n * in_ + j)] = (value - zero) * s[b];
      }
    }
    return scratch.data();
  }

 private:
  void expect(const KernelContext& ctx, const Tensor& t, const char* suffix,
              const Shape& want) const {
    if (t.shape() != want) {
      ctx.fail(std::string(name_) + suffix + " " + t.describe() + " must be [" +
                   shapeToString(want) + "]",
               ErrorCode::kInvalidArgument);
    }
  }

  const char* name_;
  int64_t out_, in_, bits_, blockSize_;
  const Tensor* weights_ = nullptr;
  const Tensor* zeros_ = nullptr;
  std::vector<float> scales_, bias_;
};

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float activate(MoEActivation a, float x) {
  switch (a) {
    case MoEActivation::kRelu:
      return std::max(x, 0.0f);
    case MoEActivation::kGelu:
      return geluTanh(x);
    case MoEActivation::kSilu:
      return x * sigmoid(x);
    default:
      return x;
  }
}

// The routed (token, weight) pairs of each expert, tokens in increasing order.
std::vector<std::vector<std::pair<int64_t, float>>> route(const MoEParams& p,
                                                          const std::vector<float>& router,
                                                          const std::vector<float>* weights,
                                                          int64_t tokens, int64_t experts) {
  std::vector<std::vector<std::pair<int64_t, float>>> routes(static_cast<size_t>(experts));
  std::vector<float> probs(static_cast<size_t>(experts));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* logits = router.data() + t * experts;
    const float top = *std::max_element(logits, logits + experts);
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += probs[e] = std::exp(logits[e] - top);
    for (float& v : probs) v = std::isnan(v) ? -1.0f : v / sum;  // NaN ranks last
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + p.k, order.end(), [&](int64_t a, int64_t b) {
      return probs[a] != probs[b] ? probs[a] > probs[b] : a > b;
    });
    float chosen = 0.0f;
    for (int64_t j = 0; j < p.k; ++j) chosen += probs[order[j]];
    for (int64_t j = 0; j < p.k; ++j) {
      const int64_t e = order[j];
      float w = weights ? (*weights)[static_cast<size_t>(t * experts + e)] : probs[e];
      if (p.normalize && !weights) w /= chosen;
      if (w > 0.0f) routes[e].emplace_back(t, w);
    }
  }
  return routes;
}

// C [rows, proj.out] = A [rows, proj.in] x expert e's weights^T + its bias.
void project(const Projection& proj, int64_t e, const float* a, int64_t rows, float* c,
             std::vector<float>& scratch, void* workspace) {
  GemmEpilogue epilogue;
  epilogue.bias = proj.bias(e);
  const float* w = proj.expert(e, scratch);
  sgemm(false, true, rows, proj.out(), proj.in(), 1.0f, a, proj.in(), w, proj.in(), 0.0f, c,
        proj.out(), workspace, epilogue);
}

// The swiglu of fc1's output row (and fc3's, for fusion 0): I values.
void swiglu(const MoEParams& p, const float* fc1, const float* fc3, int64_t inter, float* out) {
  for (int64_t i = 0; i < inter; ++i) {
    float gate = p.fusion == 1 ? fc1[2 * i] : fc1[i];
    float linear = p.fusion == 1 ? fc1[2 * i + 1] : p.fusion == 2 ? fc1[inter + i] : fc3[i];
    gate = std::min(gate, p.limit);
    linear = std::clamp(linear, -p.limit, p.limit);
    out[i] = gate * sigmoid(p.alpha * gate) * (linear + p.beta);
  }
}

void runMoE(KernelContext& ctx, const MoEParams& p) {
  const Tensor& x = ctx.input(0);
  const Tensor& router = ctx.input(1);
  const int64_t hidden = x.rank() ? x.dim(x.rank() - 1) : 0;
  const int64_t tokens = hidden ? x.numel() / hidden : 0;
  if (router.rank() != 2 || router.dim(0) != tokens) {
    ctx.fail("router_probs " + router.describe() + " must be [" + std::to_string(tokens) +
                 ", experts] (a row per token of input " + x.describe() + ")",
             ErrorCode::kInvalidArgument);
  }
  const int64_t experts = router.dim(1);
  if (p.k > experts) {
    ctx.fail("attribute 'k' " + std::to_string(p.k) + " is more than the " +
                 std::to_string(experts) + " experts of router_probs",
             ErrorCode::kInvalidArgument);
  }
  const Tensor& fc1w = ctx.input(p.inputs[0].weights);
  const Tensor& fc2w = ctx.input(p.inputs[1].weights);
  if (fc1w.rank() != 3 || fc2w.rank() != 3 || fc1w.dim(0) != experts) {
    ctx.fail("fc1_experts_weights " + fc1w.describe() + " and fc2_experts_weights " +
                 fc2w.describe() + " must be 3-D with the " + std::to_string(experts) +
                 " experts of router_probs",
             ErrorCode::kInvalidArgument);
  }
  const int64_t inter = p.bits[1] == 32 ? fc2w.dim(2) : fc2w.dim(2) * 8 / p.bits[1];
  const bool swi = p.activation == MoEActivation::kSwiglu;
  const int64_t fc1Out = swi && p.fusion != 0 ? 2 * inter : inter;
  const Projection fc1(ctx, p, p.inputs[0], "fc1", experts, fc1Out, hidden, p.bits[0]);
  const Projection fc2(ctx, p, p.inputs[1], "fc2", experts, hidden, inter, p.bits[1]);
  const bool hasFc3 = swi && p.fusion == 0;
  std::optional<Projection> fc3;
  if (hasFc3) fc3.emplace(ctx, p, p.inputs[2], "fc3", experts, inter, hidden, p.bits[2]);

  const std::vector<float> input = floatValues(x);
  const std::vector<float> logits = floatValues(router);
  std::vector<float> routerWeights;
  if (p.routerWeights != kNone && ctx.hasInput(p.routerWeights)) {
    const Tensor& rw = ctx.input(p.routerWeights);
    if (rw.shape() != router.shape()) {
      ctx.fail(
          "router_weights " + rw.describe() + " must have router_probs' shape " + router.describe(),
          ErrorCode::kInvalidArgument);
    }
    routerWeights = floatValues(rw);
  }
  const auto routes =
      route(p, logits, routerWeights.empty() ? nullptr : &routerWeights, tokens, experts);

  const int threads = poolThreads();
  const int64_t widest = std::max(fc1Out, hidden);
  void* workspace = ctx.workspace(std::max(sgemmWorkspaceBytes(tokens, widest, hidden, threads),
                                           sgemmWorkspaceBytes(tokens, hidden, inter, threads)));
  std::vector<float> out(static_cast<size_t>(tokens * hidden), 0.0f);
  std::vector<float> rows, h1, h3, act, y, scratch;
  for (int64_t e = 0; e < experts; ++e) {
    const auto& r = routes[static_cast<size_t>(e)];
    if (r.empty()) continue;
    const int64_t n = static_cast<int64_t>(r.size());
    rows.resize(static_cast<size_t>(n * hidden));
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(input.data() + r[i].first * hidden, hidden, rows.data() + i * hidden);
    h1.resize(static_cast<size_t>(n * fc1Out));
    project(fc1, e, rows.data(), n, h1.data(), scratch, workspace);
    act.resize(static_cast<size_t>(n * inter));
    if (hasFc3) {
      h3.resize(static_cast<size_t>(n * inter));
      project(*fc3, e, rows.data(), n, h3.data(), scratch, workspace);
    }
    for (int64_t i = 0; i < n; ++i) {
      if (swi) {
        swiglu(p, h1.data() + i * fc1Out, hasFc3 ? h3.data() + i * inter : nullptr, inter,
               act.data() + i * inter);
      } else {
        for (int64_t j = 0; j < inter; ++j)
          act[i * inter + j] = activate(p.activation, h1[i * inter + j]);
      }
    }
    y.resize(static_cast<size_t>(n * hidden));
    project(fc2, e, act.data(), n, y.data(), scratch, workspace);
    for (int64_t i = 0; i < n; ++i) {
      float* dst = out.data() + r[i].first * hidden;
      for (int64_t j = 0; j < hidden; ++j) dst[j] += r[i].second * y[i * hidden + j];
    }
  }
  Tensor& result = ctx.output(0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (result.dtype() == DataType::kFloat32)
      result.data<float>()[i] = out[i];
    else
      result.data<uint16_t>()[i] = floatToHalfBits(out[i]);
  }
}

MoEActivation activationOf(const ir::Node& node) {
  const std::string a = ir::attrString(node, "activation_type", "relu");
  if (a == "gelu") return MoEActivation::kGelu;
  if (a == "silu") return MoEActivation::kSilu;
  if (a == "identity") return MoEActivation::kIdentity;
  if (a == "swiglu") return MoEActivation::kSwiglu;
  return MoEActivation::kRelu;
}

MoEParams readParams(const ir::Node& node, bool quantized) {
  MoEParams p;
  p.quantized = quantized;
  p.k = ir::attrInt(node, "k", 1);
  p.normalize = quantized || ir::attrInt(node, "normalize_routing_weights", 0) != 0;
  p.activation = activationOf(node);
  p.alpha = ir::attrFloat(node, "activation_alpha", 1.0f);
  p.beta = ir::attrFloat(node, "activation_beta", 0.0f);
  p.limit = ir::attrFloat(node, "swiglu_limit", std::numeric_limits<float>::infinity());
  p.fusion = ir::attrInt(node, "swiglu_fusion", 0);
  if (!quantized) {
    p.inputs[0] = {2, kNone, 3, kNone};
    p.inputs[1] = {4, kNone, 5, kNone};
    p.inputs[2] = {6, kNone, 7, kNone};
    return p;
  }
  const int64_t bits = ir::attrInt(node, "expert_weight_bits", 4);
  p.bits[0] = ir::attrInt(node, "fc1_expert_weight_bits", bits);
  p.bits[1] = ir::attrInt(node, "fc2_expert_weight_bits", bits);
  p.bits[2] = ir::attrInt(node, "fc3_expert_weight_bits", bits);
  p.blockSize = ir::attrInt(node, "block_size", 0);
  p.inputs[0] = {2, 3, 4, 11};
  p.inputs[1] = {5, 6, 7, 12};
  p.inputs[2] = {8, 9, 10, 13};
  p.routerWeights = 14;
  return p;
}

KernelFactory moeFactory(bool quantized) {
  return [quantized](const KernelCreateInfo& info) -> KernelFn {
    const MoEParams p = readParams(info.node, quantized);
    return [p](KernelContext& ctx) { runMoE(ctx, p); };
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MoE", moeFactory(false));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QMoE", moeFactory(true));

}  // namespace kiln::cpu
