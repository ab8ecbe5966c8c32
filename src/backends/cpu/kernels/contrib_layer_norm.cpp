// CPU kernels of com.microsoft SkipLayerNormalization, SkipSimplifiedLayerNormalization and
// EmbedLayerNormalization (ir/ops/contrib_transformer.cpp), float32: each row s = input + skip +
// bias (skip repeated over the batch when it has fewer rows), or the sum of a token's word,
// position and segment embeddings, normalized by the LayerNormalization row kernel
// (layerNormRowFloat, norm_util.h), RMS statistics for the simplified op; QEmbedLayerNormalization
// runs EmbedLayerNormalization's kernel on its dequantized tables.
#include <memory>
#include <vector>

#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/norm_util.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

struct SkipNormInputs {
  size_t beta, bias;  // kAbsent where the op has no such input
};
constexpr size_t kAbsent = 1000;

// A 1-D parameter with one value per column, or `fallback` (zeros) when omitted.
const float* columnParam(const KernelContext& ctx, size_t input, const char* name, int64_t columns,
                         const std::vector<float>& fallback) {
  if (!ctx.hasInput(input)) return fallback.data();
  const Tensor& t = ctx.input(input);
  if (t.numel() != columns || t.rank() != 1) {
    ctx.fail(std::string(name) + " must be 1-D with " + std::to_string(columns) +
                 " values (the hidden size), got " + t.describe(),
             ErrorCode::kInvalidArgument);
  }
  return t.data<float>();
}

void skipLayerNorm(KernelContext& ctx, const SkipNormInputs& in, double epsilon, bool rms) {
  const Tensor& x = ctx.input(0);
  const Tensor& skip = ctx.input(1);
  const int64_t hidden = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
  const int64_t skipRows = hidden == 0 ? 0 : skip.numel() / hidden;
  const bool skipFits =
      skip.rank() >= 1 && skip.dim(skip.rank() - 1) == hidden && skipRows > 0 &&
      (skip.numel() == x.numel() || (x.rank() == 3 && skip.numel() * x.dim(0) == x.numel()));
  if (!skipFits) {
    ctx.fail("skip " + skip.describe() + " must have the input's shape " + x.describe() +
                 " or its last two dimensions",
             ErrorCode::kInvalidArgument);
  }
  const std::vector<float> zeros(static_cast<size_t>(hidden), 0.0f);
  const float* gamma = columnParam(ctx, 2, "gamma", hidden, zeros);
  const float* beta =
      in.beta == kAbsent ? zeros.data() : columnParam(ctx, in.beta, "beta", hidden, zeros);
  const float* bias = columnParam(ctx, in.bias, "bias", hidden, zeros);
  const float* src = x.data<float>();
  const float* add = skip.data<float>();
  float* y = ctx.output(0).data<float>();
  float* mean = ctx.wantsOutput(1) ? ctx.output(1).data<float>() : nullptr;
  float* invStd = ctx.wantsOutput(2) ? ctx.output(2).data<float>() : nullptr;
  float* sums = ctx.wantsOutput(3) ? ctx.output(3).data<float>() : nullptr;
  auto normalizeRows = [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(sums ? 0 : static_cast<size_t>(hidden));
    for (int64_t r = begin; r < end; ++r) {
      float* s = sums ? sums + r * hidden : scratch.data();
      const float* xr = src + r * hidden;
      const float* kr = add + (r % skipRows) * hidden;
      for (int64_t i = 0; i < hidden; ++i) s[i] = xr[i] + kr[i] + bias[i];
      const RowStats stats =
          layerNormRowFloat(s, y + r * hidden, hidden, gamma, beta, epsilon, rms);
      if (mean) mean[r] = static_cast<float>(stats.mean);
      if (invStd) invStd[r] = static_cast<float>(stats.invStd);
    }
  };
  constexpr int64_t kParallelElements =
      1 << 14;  // below this, waking the pool costs more than it saves
  if (x.numel() >= kParallelElements) {
    parallelFor(rows, normalizeRows);
  } else {
    normalizeRows(0, rows);
  }
}

KernelFactory skipLayerNormFactory(SkipNormInputs inputs, bool rms) {
  return [inputs, rms](const KernelCreateInfo& info) -> KernelFn {
    const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-12f);
    return [inputs, rms, epsilon](KernelContext& ctx) { skipLayerNorm(ctx, inputs, epsilon, rms); };
  };
}

// Row `index` of a [rows, hidden] embedding table; fails naming the table when out of range.
const float* embeddingRow(const KernelContext& ctx, size_t table, const char* name, int32_t index) {
  const Tensor& t = ctx.input(table);
  if (index < 0 || index >= t.dim(0)) {
    ctx.fail(std::string(name) + " index " + std::to_string(index) + " is outside [0, " +
                 std::to_string(t.dim(0)) + ")",
             ErrorCode::kInvalidArgument);
  }
  return t.data<float>() + static_cast<int64_t>(index) * t.dim(1);
}

void embedLayerNorm(KernelContext& ctx, double epsilon) {
  const Tensor& ids = ctx.input(0);
  const Tensor& words = ctx.input(2);
  if (ids.rank() != 2 || words.rank() != 2 || ctx.input(3).rank() != 2 ||
      ctx.input(3).dim(1) != words.dim(1) ||
      (ctx.hasInput(4) && (ctx.input(4).rank() != 2 || ctx.input(4).dim(1) != words.dim(1)))) {
    ctx.fail(
        "input_ids must be [batch, sequence] and the embeddings [rows, hidden] of one hidden size",
        ErrorCode::kInvalidArgument);
  }
  const int64_t B = ids.dim(0), S = ids.dim(1), hidden = words.dim(1);
  for (size_t i : {1, 7}) {
    if (ctx.hasInput(i) && ctx.input(i).shape() != ids.shape()) {
      ctx.fail("input " + std::to_string(i) + " " + ctx.input(i).describe() +
                   " must have input_ids' shape " + ids.describe(),
               ErrorCode::kInvalidArgument);
    }
  }
  const Tensor* positions = ctx.hasInput(8) ? &ctx.input(8) : nullptr;
  if (positions && positions->numel() != S && positions->numel() != B * S) {
    ctx.fail(
        "position_ids " + positions->describe() + " must be [1, sequence] or [batch, sequence]",
        ErrorCode::kInvalidArgument);
  }
  const std::vector<float> zeros;
  const float* gamma = columnParam(ctx, 5, "gamma", hidden, zeros);
  const float* beta = columnParam(ctx, 6, "beta", hidden, zeros);
  float* y = ctx.output(0).data<float>();
  float* sums = ctx.wantsOutput(2) ? ctx.output(2).data<float>() : nullptr;
  std::vector<float> scratch(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < B * S; ++r) {
    const int32_t position = positions
                                 ? positions->data<int32_t>()[positions->numel() == S ? r % S : r]
                                 : static_cast<int32_t>(r % S);
    const float* w = embeddingRow(ctx, 2, "word_embedding", ids.data<int32_t>()[r]);
    const float* p = embeddingRow(ctx, 3, "position_embedding", position);
    const float* g =
        ctx.hasInput(4) ? embeddingRow(ctx, 4, "segment_embedding", ctx.input(1).data<int32_t>()[r])
                        : nullptr;
    float* s = sums ? sums + r * hidden : scratch.data();
    for (int64_t i = 0; i < hidden; ++i) s[i] = w[i] + p[i] + (g ? g[i] : 0.0f);
    layerNormRowFloat(s, y + r * hidden, hidden, gamma, beta, epsilon, false);
  }
  if (ctx.wantsOutput(1)) {  // the number of unmasked tokens of each entry (0 without a mask)
    int32_t* index = ctx.output(1).data<int32_t>();
    for (int64_t b = 0; b < B; ++b) {
      index[b] = 0;
      for (int64_t t = 0; ctx.hasInput(7) && t < S; ++t)
        index[b] += ctx.input(7).data<int32_t>()[b * S + t] != 0;
    }
  }
}

KernelFn makeEmbedLayerNormKernel(const KernelCreateInfo& info) {
  const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-12f);
  return [epsilon](KernelContext& ctx) { embedLayerNorm(ctx, epsilon); };
}

// QEmbedLayerNormalization's quantized inputs 2-6 (embeddings, gamma, beta) as float32:
// (q - zero point) x scale with the per-tensor scale (input i + 6) and zero point (input i + 11).
Tensor dequantizeEmbedInput(const ir::Node& node, const std::vector<const Tensor*>& in, size_t i) {
  const Tensor& q = *in[i];
  const Tensor& scale = *in[i + 6];
  const Tensor& zero = *in[i + 11];
  if (scale.numel() != 1 || zero.numel() != 1 || scale.rank() > 1 || zero.rank() > 1) {
    ir::failNode(node,
                 "input " + std::to_string(i) + "'s scale " + scale.describe() +
                     " and zero point " + zero.describe() + " must be scalars or 1-element vectors",
                 ErrorCode::kInvalidArgument);
  }
  const bool isSigned = q.dtype() == DataType::kInt8;
  const float s = scale.data<float>()[0];
  const int32_t z = isSigned ? zero.data<int8_t>()[0] : zero.data<uint8_t>()[0];
  Tensor out(DataType::kFloat32, q.shape());
  float* dst = out.data<float>();
  for (int64_t e = 0; e < q.numel(); ++e) {
    const int32_t v = isSigned ? q.data<int8_t>()[e] : q.data<uint8_t>()[e];
    dst[e] = static_cast<float>(v - z) * s;
  }
  return out;
}

constexpr size_t kQuantizedEmbedInputs[] = {2, 3, 4, 5, 6};

// The dequantized inputs 2-6 (an undefined tensor for an omitted segment embedding).
std::vector<Tensor> dequantizeEmbedInputs(const ir::Node& node,
                                          const std::vector<const Tensor*>& in) {
  std::vector<Tensor> out;
  for (size_t i : kQuantizedEmbedInputs)
    out.push_back(in[i] ? dequantizeEmbedInput(node, in, i) : Tensor());
  return out;
}

// EmbedLayerNormalization's kernel on the dequantized tables (once, when they are constants);
// mask_index counts the mask's entries equal to 1, as onnxruntime's QEmbedLayerNormalization does.
KernelFn makeQEmbedLayerNormKernel(const KernelCreateInfo& info) {
  const double epsilon = ir::attrFloat(info.node, "epsilon", 1e-12f);
  std::vector<const Tensor*> constants(18, nullptr);
  bool allConstant = true;
  for (size_t i = 2; i < 18; ++i) {
    const bool present = i < info.node.inputs.size() && info.node.inputs[i] != ir::kNoValue;
    if (i == 7 || !present) continue;
    constants[i] = i < info.constants.size() ? info.constants[i] : nullptr;
    allConstant = allConstant && constants[i];
  }
  auto tables = std::make_shared<std::vector<Tensor>>();
  if (allConstant) *tables = dequantizeEmbedInputs(info.node, constants);
  return [epsilon, tables, label = nodeLabel(info.node)](KernelContext& ctx) {
    std::vector<Tensor> fed;
    if (tables->empty()) {
      std::vector<const Tensor*> in(18, nullptr);
      for (size_t i = 0; i < 18; ++i) in[i] = ctx.hasInput(i) ? &ctx.input(i) : nullptr;
      fed = dequantizeEmbedInputs(label, in);
    }
    const std::vector<Tensor>& t = tables->empty() ? fed : *tables;
    auto table = [&](size_t j) { return t[j].defined() ? &t[j] : nullptr; };
    const Tensor* ids = &ctx.input(0);
    const Tensor* segments = ctx.hasInput(1) ? &ctx.input(1) : nullptr;
    if (ids->rank() != 2)
      ctx.fail("input_ids " + ids->describe() + " must be 2-D", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    std::vector<Tensor> outputs(3);
    const std::vector<ir::TypeInfo> types = {
        ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(y.shape())},
        ir::TypeInfo{DataType::kInt32, ir::symShapeOf(Shape{ids->dim(0)})},
        ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(y.shape())}};
    KernelContext embed(ctx,
                        {ids, segments, table(0), table(1), table(2), table(3), table(4), nullptr},
                        outputs, types);
    embedLayerNorm(embed, epsilon);
    ctx.setOutput(0, outputs[0]);
    if (!ctx.wantsOutput(1)) return;
    if (ctx.hasInput(7) && ctx.input(7).shape() != ids->shape()) {
      ctx.fail("mask " + ctx.input(7).describe() + " must have input_ids' shape " + ids->describe(),
               ErrorCode::kInvalidArgument);
    }
    Tensor& index = ctx.output(1);
    const int64_t S = ids->dim(1);
    for (int64_t b = 0; b < ids->dim(0); ++b) {
      int32_t count = 0;
      for (int64_t s = 0; ctx.hasInput(7) && s < S; ++s)
        count += ctx.input(7).data<int32_t>()[b * S + s] == 1;
      index.data<int32_t>()[b] = count;
    }
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "EmbedLayerNormalization",
                                KernelFactory(makeEmbedLayerNormKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QEmbedLayerNormalization",
                                KernelFactory(makeQEmbedLayerNormKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "SkipLayerNormalization",
                                skipLayerNormFactory({3, 4}, false));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "SkipSimplifiedLayerNormalization",
                                skipLayerNormFactory({kAbsent, 3}, true));

}  // namespace kiln::cpu
