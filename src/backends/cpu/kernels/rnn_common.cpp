// Attribute parsing and call geometry shared by the RNN, GRU and LSTM kernels.
#include "backends/cpu/kernels/rnn_common.h"

#include <cctype>

namespace kiln::cpu::rnn {
namespace {

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool takesAlpha, takesBeta;
  float defaultAlpha, defaultBeta;
};

constexpr ActivationInfo kActivations[] = {
    {"relu", ActivationKind::kRelu, false, false, 0, 0},
    {"tanh", ActivationKind::kTanh, false, false, 0, 0},
    {"sigmoid", ActivationKind::kSigmoid, false, false, 0, 0},
    {"affine", ActivationKind::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", ActivationKind::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", ActivationKind::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", ActivationKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", ActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActivationKind::kElu, true, false, 1.0f, 0},
    {"softsign", ActivationKind::kSoftsign, false, false, 0, 0},
    {"softplus", ActivationKind::kSoftplus, false, false, 0, 0},
};

const ActivationInfo& findActivation(const ir::Node& node, const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const ActivationInfo& info : kActivations) {
    if (lower == info.name) return info;
  }
  ir::failNode(node, "unsupported activation '" + name + "'", ErrorCode::kUnsupportedNode);
}

}  // namespace

RecurrentAttrs parseRecurrentAttrs(const ir::Node& node, const std::vector<std::string>& defaults) {
  RecurrentAttrs a;
  std::string direction = ir::attrString(node, "direction", "forward");
  a.directions = direction == "bidirectional" ? 2 : 1;
  a.reverse = direction == "reverse";
  a.layout = node.opset >= 14 ? ir::attrInt(node, "layout", 0) : 0;
  if (ir::hasAttr(node, "clip")) {
    a.clip = ir::attrFloat(node, "clip");
    if (!(a.clip > 0)) ir::failNode(node, "attribute 'clip' must be positive");
  }
  std::vector<std::string> names = ir::hasAttr(node, "activations")
                                       ? ir::attrStrings(node, "activations")
                                       : std::vector<std::string>{};
  const size_t perDirection = defaults.size();
  const size_t total = perDirection * static_cast<size_t>(a.directions);
  if (names.empty()) {
    for (int64_t d = 0; d < a.directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == perDirection && a.directions == 2) {
    names.insert(names.end(), names.begin(), names.end());  // one list for both directions
  }
  if (names.size() != total) {
    ir::failNode(node, "attribute 'activations' has " + std::to_string(names.size()) +
                           " functions, expected " + std::to_string(total));
  }
  // activation_alpha/beta are consumed in order by the functions that take them.
  std::vector<float> alphas = ir::attrFloats(node, "activation_alpha", {});
  std::vector<float> betas = ir::attrFloats(node, "activation_beta", {});
  size_t nextAlpha = 0, nextBeta = 0;
  for (const std::string& name : names) {
    const ActivationInfo& info = findActivation(node, name);
    Activation act{info.kind, info.defaultAlpha, info.defaultBeta};
    if (info.takesAlpha && nextAlpha < alphas.size()) act.alpha = alphas[nextAlpha++];
    if (info.takesBeta && nextBeta < betas.size()) act.beta = betas[nextBeta++];
    a.activations.push_back(act);
  }
  return a;
}

RecurrentDims recurrentDims(KernelContext& ctx, const RecurrentAttrs& attrs, int64_t gates) {
  const Shape& x = ctx.input(0).shape();
  const Shape& r = ctx.input(2).shape();
  RecurrentDims dims;
  dims.layout = attrs.layout;
  dims.directions = attrs.directions;
  dims.seq = attrs.layout == 0 ? x[0] : x[1];
  dims.batch = attrs.layout == 0 ? x[1] : x[0];
  dims.input = x[2];
  dims.hidden = r[2];
  Shape w = {dims.directions, gates * dims.hidden, dims.input};
  Shape rExpected = {dims.directions, gates * dims.hidden, dims.hidden};
  if (ctx.input(1).shape() != w)
    ctx.fail("W has shape " + shapeToString(ctx.input(1).shape()) + ", expected " +
             shapeToString(w));
  if (r != rExpected)
    ctx.fail("R has shape " + shapeToString(r) + ", expected " + shapeToString(rExpected));
  return dims;
}

std::vector<int64_t> sequenceLengths(KernelContext& ctx, const RecurrentDims& dims) {
  std::vector<int64_t> lengths(static_cast<size_t>(dims.batch), dims.seq);
  if (!ctx.hasInput(4)) return lengths;
  const Tensor& t = ctx.input(4);
  if (t.numel() != dims.batch) {
    ctx.fail("sequence_lens has " + std::to_string(t.numel()) + " values, expected batch size " +
             std::to_string(dims.batch));
  }
  for (int64_t b = 0; b < dims.batch; ++b) {
    int64_t len = t.intAt(b);
    if (len < 0 || len > dims.seq) {
      ctx.fail("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(len) +
               " is outside [0, " + std::to_string(dims.seq) + "]");
    }
    lengths[static_cast<size_t>(b)] = len;
  }
  return lengths;
}

namespace {

// The input projection with `multiply(rows, beta, out)` computing out = X x W^T + beta * out
// over the rows of X as laid out.
template <typename Multiply>
void projectInputsWith(const RecurrentDims& dims, const std::vector<float>& bias, float* out,
                       Multiply&& multiply) {
  const int64_t n = static_cast<int64_t>(bias.size()), rows = dims.seq * dims.batch;
  for (int64_t row = 0; row < rows; ++row) std::copy(bias.begin(), bias.end(), out + row * n);
  if (dims.layout == 0) {
    multiply(rows, 1.0f, out);
    return;
  }
  // layout 1: X is [batch, seq, input]; rows come out batch-major and are moved to [seq, batch].
  std::vector<float> byBatch(static_cast<size_t>(rows * n));
  multiply(rows, 0.0f, byBatch.data());
  for (int64_t bi = 0; bi < dims.batch; ++bi) {
    for (int64_t t = 0; t < dims.seq; ++t) {
      const float* src = &byBatch[static_cast<size_t>((bi * dims.seq + t) * n)];
      float* dst = out + (t * dims.batch + bi) * n;
      for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
    }
  }
}

}  // namespace

void projectInputsSgemm(const float* x, const RecurrentDims& dims, const float* b, bool transB,
                        int64_t ldb, const std::vector<float>& bias, float* out, void* workspace) {
  const int64_t n = static_cast<int64_t>(bias.size());
  projectInputsWith(dims, bias, out, [&](int64_t rows, float beta, float* c) {
    sgemm(false, transB, rows, n, dims.input, 1.0f, x, dims.input, b, ldb, beta, c, n, workspace);
  });
}

void projectInputsSgemm(const float* x, const RecurrentDims& dims, const PackedMatrix& wt,
                        const std::vector<float>& bias, float* out, void* workspace) {
  const int64_t n = static_cast<int64_t>(bias.size());
  projectInputsWith(dims, bias, out, [&](int64_t rows, float beta, float* c) {
    sgemmPacked(false, rows, 1.0f, x, dims.input, wt, beta, c, n, workspace);
  });
}

uint64_t projectionBytes(const RecurrentDims& dims, int64_t n) {
  const uint64_t floats = static_cast<uint64_t>(dims.seq * dims.batch * n);
  return (floats * sizeof(float) + 63) / 64 * 64;
}

BatchRecurrentProduct::BatchRecurrentProduct(const float* b, bool transB, int64_t ldb,
                                             int64_t batch, int64_t hidden, int64_t cols)
    : b_(b),
      transB_(transB),
      ldb_(ldb),
      batch_(batch),
      hidden_(hidden),
      cols_(cols),
      product_(static_cast<size_t>(batch * cols)) {
  if (batch > 1) packed_ = packB(transB, hidden, cols, b, ldb);
}

BatchRecurrentProduct::BatchRecurrentProduct(const PackedMatrix& rt, int64_t batch)
    : b_(nullptr),
      transB_(false),
      ldb_(0),
      batch_(batch),
      hidden_(rt.rows()),
      cols_(rt.cols()),
      packed_(rt),
      product_(static_cast<size_t>(batch * rt.cols())) {}

uint64_t BatchRecurrentProduct::workspaceBytes(int64_t batch, int64_t hidden, int64_t cols,
                                               int threads) {
  const PackedMatrix shape =
      PackedMatrix::view(PackedMatrix::Side::kB, activeCpuIsa(), hidden, cols, nullptr);
  const uint64_t packed = sgemmWorkspaceBytes(shape, batch, threads);
  if (batch > 1) return packed;
  return std::max(packed, sgemmWorkspaceBytes(batch, cols, hidden, threads));
}

void BatchRecurrentProduct::multiply(const float* hState, void* workspace) {
  if (packed_.empty()) {
    sgemm(false, transB_, batch_, cols_, hidden_, 1.0f, hState, hidden_, b_, ldb_, 0.0f,
          product_.data(), cols_, workspace);
  } else {
    sgemmPacked(false, batch_, 1.0f, hState, hidden_, packed_, 0.0f, product_.data(), cols_,
                workspace);
  }
}

uint64_t recurrentWorkspaceBytes(const RecurrentDims& dims, int64_t n, int64_t cols, int threads) {
  const int64_t rows = dims.seq * dims.batch;
  const PackedMatrix packedW =
      PackedMatrix::view(PackedMatrix::Side::kB, activeCpuIsa(), dims.input, n, nullptr);
  const uint64_t projection = std::max(sgemmWorkspaceBytes(rows, n, dims.input, threads),
                                       sgemmWorkspaceBytes(packedW, rows, threads));
  if (cols <= 0) return projection;
  return std::max(projection,
                  BatchRecurrentProduct::workspaceBytes(dims.batch, dims.hidden, cols, threads));
}

WorkspaceFn recurrentWorkspace(const RecurrentAttrs& attrs, int64_t gates, int64_t colsPerHidden,
                               DataType dtype, bool projectionFirst) {
  if (dtype == DataType::kFloat64) return {};
  return [attrs, gates, colsPerHidden, projectionFirst](const std::vector<const Shape*>& in,
                                                        int threads) -> uint64_t {
    if (in.size() < 3 || !in[0] || !in[2] || in[0]->size() != 3 || in[2]->size() != 3) return 0;
    const Shape& x = *in[0];
    RecurrentDims dims;
    dims.seq = attrs.layout == 0 ? x[0] : x[1];
    dims.batch = attrs.layout == 0 ? x[1] : x[0];
    dims.input = x[2];
    dims.hidden = (*in[2])[2];
    const int64_t n = gates * dims.hidden;
    return (projectionFirst ? projectionBytes(dims, n) : 0) +
           recurrentWorkspaceBytes(dims, n, colsPerHidden * dims.hidden, threads);
  };
}

PackedRecurrentWeights packRecurrentWeights(const KernelCreateInfo& info, int64_t gates,
                                            int64_t colsPerHidden) {
  const Tensor* w = info.constants.size() > 2 ? info.constants[1] : nullptr;
  const Tensor* r = info.constants.size() > 2 ? info.constants[2] : nullptr;
  PackedRecurrentWeights packed;
  if (!w || !r || w->dtype() != DataType::kFloat32 || r->dtype() != DataType::kFloat32 ||
      w->rank() != 3 || r->rank() != 3 || w->numel() == 0 || r->numel() == 0)
    return packed;
  const int64_t directions = w->dim(0), n = w->dim(1), input = w->dim(2), hidden = r->dim(2);
  if (r->dim(0) != directions || r->dim(1) != n || n != gates * hidden) return packed;
  for (int64_t d = 0; d < directions; ++d) {
    packed.w.push_back(packB(true, input, n, w->data<float>() + d * n * input, input));
    packed.r.push_back(
        packB(true, hidden, colsPerHidden * hidden, r->data<float>() + d * n * hidden, hidden));
  }
  info.keepsOwnCopyOf(1);
  info.keepsOwnCopyOf(2);
  return packed;
}

}  // namespace kiln::cpu::rnn
