#include "backends/cpu/kernels/qgemm_op_support.h"

#include <algorithm>
#include <cmath>

#include "core/dtype_dispatch.h"

namespace kiln::cpu {
namespace {

bool isEightBit(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// Elements of a statically shaped input, or -1 when its shape is not known.
int64_t staticNumel(const ir::TypeInfo* t) {
  if (!t || !t->shape) return -1;
  int64_t n = 1;
  for (const auto& d : *t->shape) {
    if (!d.isKnown()) return -1;
    n *= d.value;
  }
  return n;
}

}  // namespace

const Tensor* constantInput(const KernelCreateInfo& info, int i) {
  return i >= 0 && static_cast<size_t>(i) < info.constants.size()
             ? info.constants[static_cast<size_t>(i)]
             : nullptr;
}

const ir::TypeInfo* inputType(const KernelCreateInfo& info, int i) {
  return i >= 0 && static_cast<size_t>(i) < info.inputTypes.size()
             ? info.inputTypes[static_cast<size_t>(i)]
             : nullptr;
}

std::string qproductDeclines(const KernelCreateInfo& info, const QProductSignature& s,
                             int64_t weightRank) {
  const ir::TypeInfo* a = inputType(info, s.a);
  if (!a || !isEightBit(a->dtype)) return "the activations are not uint8 or int8";
  const Tensor* w = constantInput(info, s.b);
  if (!w) return "the weights are not a constant";
  if (!isEightBit(w->dtype())) return "the weights " + w->describe() + " are not uint8 or int8";
  if (weightRank > 0 && static_cast<int64_t>(w->rank()) != weightRank) {
    return "the weights " + w->describe() + " do not have rank " + std::to_string(weightRank);
  }
  for (int scale : {s.aScale, s.bScale, s.yScale}) {
    const ir::TypeInfo* t = inputType(info, scale);
    if (t && t->dtype != DataType::kFloat32)
      return std::string("a scale is ") + dataTypeName(t->dtype) + ", not float32";
  }
  if (s.aScale != kNoInput && staticNumel(inputType(info, s.aScale)) != 1)
    return "the activations' scale is not one value";
  if (s.yScale != kNoInput && staticNumel(inputType(info, s.yScale)) != 1)
    return "the output scale is not one value";
  if (s.yZero != kNoInput && staticNumel(inputType(info, s.yZero)) > 1)
    return "the output zero point is not one value";
  const ActivationKind k = s.act.kind;
  if (k != ActivationKind::kNone && k != ActivationKind::kRelu && k != ActivationKind::kClip) {
    return std::string("the fused ") + activationName(k) + " is not a clamp";
  }
  return "";
}

int32_t zeroPointAt(const Tensor& zp, int64_t i) {
  switch (zp.dtype()) {
    case DataType::kUint8:
      return zp.data<uint8_t>()[i];
    case DataType::kInt8:
      return zp.data<int8_t>()[i];
    case DataType::kInt32:
      return zp.data<int32_t>()[i];
    default:
      throwUnsupportedType(zp.dtype(), "zero point");
  }
}

int64_t loadZeroPoints(const KernelContext& ctx, int input, const char* name, int64_t count,
                       int32_t shift, int32_t* out) {
  if (input == kNoInput || !ctx.hasInput(static_cast<size_t>(input))) {
    out[0] = shift;
    return 1;
  }
  const Tensor& zp = ctx.input(static_cast<size_t>(input));
  const int64_t n = zp.numel();
  if (n != 1 && (zp.rank() != 1 || n != count)) {
    ctx.fail(std::string(name) + " (input " + std::to_string(input) + ") must be one value or " +
                 std::to_string(count) + " values in a 1-D tensor, got " + zp.describe(),
             ErrorCode::kInvalidArgument);
  }
  for (int64_t i = 0; i < n; ++i) out[i] = zeroPointAt(zp, i) + shift;
  return n;
}

const float* scaleValues(const KernelContext& ctx, int input, const char* name, int64_t count,
                         int64_t& n) {
  const Tensor& t = ctx.input(static_cast<size_t>(input));
  n = t.numel();
  if (t.dtype() != DataType::kFloat32 || (n != 1 && (t.rank() != 1 || n != count))) {
    ctx.fail(std::string(name) + " (input " + std::to_string(input) +
                 ") must be float32, one value" +
                 (count > 1 ? " or " + std::to_string(count) + " values in a 1-D tensor"
                            : std::string()) +
                 ", got " + t.describe(),
             ErrorCode::kInvalidArgument);
  }
  return t.data<float>();
}

namespace {

// The output's [lowest, highest] for a quantized dtype narrowed by act (Relu, Clip) at
// (yScale, zeroPoint), and the float bounds of act for a float output.
void setOutputBounds(QGemmOutput& out, const Activation& act, float yScale) {
  const bool clip = act.kind == ActivationKind::kClip, relu = act.kind == ActivationKind::kRelu;
  if (out.dtype == DataType::kFloat32) {
    if (relu || clip) out.floatLowest = relu ? 0.0f : act.alpha;
    if (clip) out.floatHighest = act.beta;
    return;
  }
  out.lowest = out.dtype == DataType::kInt8 ? -128 : 0;
  out.highest = out.dtype == DataType::kInt8 ? 127 : 255;
  // Relu is q >= zp; Clip's bounds quantized as QuantizeLinear would (round half to even).
  auto quantized = [&](float v) {
    return static_cast<double>(std::nearbyint(v / yScale)) + out.zeroPoint;
  };
  if (relu) out.lowest = std::max(out.lowest, out.zeroPoint);
  if (clip) {
    out.lowest =
        static_cast<int32_t>(std::clamp<double>(quantized(act.alpha), out.lowest, out.highest));
    out.highest =
        static_cast<int32_t>(std::clamp<double>(quantized(act.beta), out.lowest, out.highest));
  }
}

}  // namespace

QGemmOutput productOutput(const KernelContext& ctx, const QProductSignature& s, DataType dtype,
                          int64_t channels, const char* aName, const char* bName,
                          float* multipliers) {
  QGemmOutput out;
  out.dtype = dtype;
  if (s.aScale == kNoInput) return out;  // int32
  int64_t na = 0, nb = 0, ny = 0;
  const float aScale = scaleValues(ctx, s.aScale, aName, 1, na)[0];
  const float* bScale = scaleValues(ctx, s.bScale, bName, channels, nb);
  const bool quantized = s.yScale != kNoInput;
  const float yScale = quantized ? scaleValues(ctx, s.yScale, "y_scale", 1, ny)[0] : 1.0f;
  for (int64_t c = 0; c < nb; ++c) {
    float v = aScale * bScale[c];
    if (s.alpha != 1.0f) v *= s.alpha;
    multipliers[c] = quantized ? v / yScale : v;
  }
  out.scale = multipliers;
  out.scaleCount = nb;
  if (quantized) {
    if (dtype != DataType::kUint8 && dtype != DataType::kInt8) {
      ctx.fail(std::string("the output must be uint8 or int8, got ") + dataTypeName(dtype));
    }
    loadZeroPoints(ctx, s.yZero, "y_zero_point", 1, 0, &out.zeroPoint);
  }
  setOutputBounds(out, s.act, yScale);
  return out;
}

const int32_t* productBias(const KernelContext& ctx, const QProductSignature& s, int64_t channels) {
  if (s.bias == kNoInput || !ctx.hasInput(static_cast<size_t>(s.bias))) return nullptr;
  const Tensor& b = ctx.input(static_cast<size_t>(s.bias));
  if (b.dtype() != DataType::kInt32 || b.numel() != channels || b.rank() > 1) {
    ctx.fail("the bias (input " + std::to_string(s.bias) +
                 ") must hold one int32 per output channel (" + std::to_string(channels) +
                 "), got " + b.describe(),
             ErrorCode::kInvalidArgument);
  }
  return b.data<int32_t>();
}

KernelBlob blobOf(const PackedQMatrix& m) { return {m.blob(), m.blobBytes()}; }

PackedQMatrix savedQWeights(const ir::Node& node, const KernelState& state, size_t k, QSide side,
                            CpuIsa isa, int64_t outer, int64_t depth) {
  const uint64_t expected = PackedQMatrix::blobBytes(side, isa, outer, depth);
  const size_t paramBytes = PackedQMatrix().params().size();
  std::vector<uint8_t> params;
  if (state.params.size() >= (k + 1) * paramBytes) {
    params.assign(state.params.begin() + static_cast<std::ptrdiff_t>(k * paramBytes),
                  state.params.begin() + static_cast<std::ptrdiff_t>((k + 1) * paramBytes));
  }
  PackedQMatrix m;
  if (k >= state.blobs.size() || state.blobs[k].bytes != expected ||
      !PackedQMatrix::view(side, isa, outer, depth, params,
                           std::shared_ptr<const uint8_t>(
                               state.owner, static_cast<const uint8_t*>(state.blobs[k].data)),
                           m)) {
    throw Error(
        ErrorCode::kInvalidPlan,
        "layer '" + node.name + "': packed 8-bit weights " + std::to_string(k) + " have " +
            (k < state.blobs.size() ? std::to_string(state.blobs[k].bytes) : std::string("no")) +
            " bytes and " + std::to_string(state.params.size()) +
            " parameter bytes; its kernel packs " + std::to_string(expected) + " bytes and " +
            std::to_string(paramBytes) + " parameter bytes each");
  }
  return m;
}

std::string qkernelId(const std::string& prefix, CpuIsa isa) {
  return prefix + "_" + cpuIsaName(isa);
}

std::string qactivationsPrefix(DataType activations) {
  return activations == DataType::kInt8 ? "s8s8" : "u8s8";
}

QProductSignature integerProductSignature(const ir::Node&) {
  QProductSignature s;
  s.a = 0, s.b = 1, s.aZero = 2, s.bZero = 3;
  return s;
}

}  // namespace kiln::cpu
