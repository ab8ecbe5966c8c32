// CPU kernels of RotaryEmbedding (and com.microsoft's RotaryEmbedding and MRotaryEmbedding):
// rotates the first rotary_embedding_dim features of every head by the angle whose cos/sin the
// caches hold for the token's position (rotateHead, rotary_embedding.h).
#include "backends/cpu/kernels/rotary_embedding.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/shape_helpers.h"

namespace kiln::cpu {
namespace {

struct RotaryAttrs {
  bool interleaved = false;
  int64_t numHeads = 0;   // of a 3-D input
  int64_t rotaryDim = 0;  // 0: the head size
};

RotaryAttrs rotaryAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "interleaved", 0) != 0, ir::attrInt(node, "num_heads", 0),
          ir::attrInt(node, "rotary_embedding_dim", 0)};
}

void rotaryEmbeddingKernel(KernelContext& ctx, const RotaryAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& cosCache = ctx.input(1);
  const Tensor& sinCache = ctx.input(2);
  const Tensor* positions = ctx.hasInput(3) ? &ctx.input(3) : nullptr;
  const bool interleaved = attrs.interleaved;
  if (x.rank() != 3 && x.rank() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + x.describe(), ErrorCode::kInvalidArgument);
  // Layout: (B, H, S, D) when 4-D, (B, S, H * D) when 3-D.
  const bool fourD = x.rank() == 4;
  const int64_t batches = x.dim(0), seq = fourD ? x.dim(2) : x.dim(1);
  const int64_t heads = fourD ? x.dim(1) : attrs.numHeads;
  if (heads <= 0 || (!fourD && x.dim(2) % heads != 0))
    ctx.fail("num_heads must divide the hidden size", ErrorCode::kInvalidArgument);
  const int64_t headSize = fourD ? x.dim(3) : x.dim(2) / heads;
  int64_t rot = attrs.rotaryDim;
  if (rot == 0) rot = headSize;
  const int64_t half = rot / 2;
  if (rot % 2 != 0 || rot > headSize)
    ctx.fail("rotary_embedding_dim must be even and at most the head size",
             ErrorCode::kInvalidArgument);
  if (cosCache.shape() != sinCache.shape() || cosCache.rank() < 2 ||
      cosCache.shape().back() != half) {
    ctx.fail("cos_cache " + cosCache.describe() + " and sin_cache " + sinCache.describe() +
                 " must end in rotary_embedding_dim / 2 = " + std::to_string(half),
             ErrorCode::kInvalidArgument);
  }
  const int64_t cacheRows = cosCache.numel() / half;
  if (positions) {
    if (positions->numel() != batches * seq)
      ctx.fail("position_ids must be (batch, sequence)", ErrorCode::kInvalidArgument);
  } else if (cacheRows != batches * seq) {
    ctx.fail("without position_ids the caches must be (batch, sequence, rotary_embedding_dim / 2)",
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "RotaryEmbedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::copy(px, px + x.numel(), py);  // features past rotary_embedding_dim pass through
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t row = positions ? positions->intAt(b * seq + s) : b * seq + s;
        if (row < 0 || row >= cacheRows)
          ctx.fail("position id " + std::to_string(row) + " is outside the caches",
                   ErrorCode::kInvalidArgument);
        const T* cosRow = cosCache.data<T>() + row * half;
        const T* sinRow = sinCache.data<T>() + row * half;
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = fourD ? ((b * heads + h) * seq + s) * headSize
                                     : ((b * seq + s) * heads + h) * headSize;
          rotateHead(px + base, py + base, half, interleaved, cosRow, sinRow);
        }
      }
    }
  });
}

// com.microsoft RotaryEmbedding(input, position_ids, cos_cache, sin_cache): ONNX's op with the
// inputs in another order, position_ids [batch, sequence] or one offset ([1]: positions offset +
// s), and num_heads of a 3-D input 0 when each head is rotated whole (head size 2 * cos_cache's
// width).
void contribRotaryEmbeddingKernel(KernelContext& ctx, const RotaryAttrs& contribAttrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  if (x.rank() != 3 && x.rank() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + x.describe(), ErrorCode::kInvalidArgument);
  const int64_t batches = x.dim(0), seq = x.rank() == 4 ? x.dim(2) : x.dim(1);
  Tensor positions = ids;
  if (ids.numel() == 1) {
    positions = Tensor(DataType::kInt64, Shape{batches, seq});
    for (int64_t i = 0; i < batches * seq; ++i)
      positions.data<int64_t>()[i] = ids.intAt(0) + i % seq;
  }
  RotaryAttrs attrs = contribAttrs;
  if (x.rank() == 3 && attrs.numHeads == 0) {
    const int64_t headSize = attrs.rotaryDim > 0 ? 0 : 2 * ctx.input(2).shape().back();
    if (headSize <= 0 || x.dim(2) % headSize != 0) {
      ctx.fail("a 3-D input needs num_heads unless each head is rotated whole",
               ErrorCode::kInvalidArgument);
    }
    attrs.numHeads = x.dim(2) / headSize;
  }
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> types = {ir::TypeInfo{x.dtype(), ir::symShapeOf(x.shape())}};
  KernelContext onnx(ctx, {&x, &ctx.input(2), &ctx.input(3), &positions}, outputs, types);
  rotaryEmbeddingKernel(onnx, attrs);
  ctx.setOutput(0, outputs[0]);
}

struct MRotaryAttrs {
  RotaryAttrs rotary;
  std::vector<int64_t> section;      // cache columns of the temporal, height and width positions
  bool interleavedSections = false;  // mrope_layout 1: height and width every third column
  float scale = 1.0f;
};

MRotaryAttrs mrotaryAttrs(const ir::Node& node) {
  return {rotaryAttrs(node), ir::attrInts(node, "mrope_section"),
          ir::attrInt(node, "mrope_layout", 0) == 1, ir::attrFloat(node, "scale", 1.0f)};
}

// The position stream (0 temporal, 1 height, 2 width) of each of the `half` cache columns.
std::vector<int> mropeStreams(const MRotaryAttrs& a, int64_t half) {
  std::vector<int> stream(static_cast<size_t>(half), 0);
  if (!a.interleavedSections) {
    int64_t col = 0;
    for (int s = 0; s < 3; ++s)
      for (int64_t i = 0; i < a.section[s] && col < half; ++i) stream[col++] = s;
  } else {
    for (int s = 1; s < 3; ++s)
      for (int64_t i = s; i < a.section[s] * 3 && i < half; i += 3) stream[i] = s;
  }
  return stream;
}

// com.microsoft MRotaryEmbedding(input, position_ids (3, B, S), cos_cache, sin_cache): the
// rotation of each token by a cos / sin row whose columns come from the cache rows of its
// temporal, height and width positions (mrope_section, mrope_layout), times `scale`.
void mrotaryEmbeddingKernel(KernelContext& ctx, const MRotaryAttrs& a) {
  const Tensor& x = ctx.input(0);
  const Tensor& ids = ctx.input(1);
  const Tensor& cosCache = ctx.input(2);
  const Tensor& sinCache = ctx.input(3);
  if (x.rank() != 3 && x.rank() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + x.describe(), ErrorCode::kInvalidArgument);
  const bool fourD = x.rank() == 4;
  const int64_t batches = x.dim(0), seq = fourD ? x.dim(2) : x.dim(1);
  const int64_t heads = fourD ? x.dim(1) : a.rotary.numHeads;
  if (heads <= 0 || (!fourD && x.dim(2) % heads != 0))
    ctx.fail("num_heads must divide the hidden size", ErrorCode::kInvalidArgument);
  const int64_t headSize = fourD ? x.dim(3) : x.dim(2) / heads;
  const int64_t rot = a.rotary.rotaryDim > 0 ? a.rotary.rotaryDim : headSize, half = rot / 2;
  if (rot > headSize || cosCache.rank() != 2 || cosCache.shape() != sinCache.shape() ||
      cosCache.dim(1) != half) {
    ctx.fail("cos_cache " + cosCache.describe() + " and sin_cache " + sinCache.describe() +
                 " must be (max positions, rotary dim / 2 = " + std::to_string(half) +
                 "), the rotary dim at most the head size " + std::to_string(headSize),
             ErrorCode::kInvalidArgument);
  }
  if (a.section[0] + a.section[1] + a.section[2] != half) {
    ctx.fail("mrope_section must add up to rotary dim / 2 = " + std::to_string(half),
             ErrorCode::kInvalidArgument);
  }
  if (ids.shape() != Shape{3, batches, seq}) {
    ctx.fail("position_ids " + ids.describe() + " must be (3, batch, sequence)",
             ErrorCode::kInvalidArgument);
  }
  const std::vector<int> stream = mropeStreams(a, half);
  const int64_t positions = cosCache.dim(0);
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "MRotaryEmbedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::copy(px, px + x.numel(), py);  // features past the rotary dim pass through
    std::vector<T> cosRow(static_cast<size_t>(half)), sinRow(static_cast<size_t>(half));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        for (int64_t col = 0; col < half; ++col) {
          const int64_t pos = ids.intAt((stream[col] * batches + b) * seq + s);
          if (pos < 0 || pos >= positions)
            ctx.fail("position id " + std::to_string(pos) + " is outside the caches",
                     ErrorCode::kInvalidArgument);
          cosRow[col] =
              static_cast<T>(static_cast<float>(cosCache.data<T>()[pos * half + col]) * a.scale);
          sinRow[col] =
              static_cast<T>(static_cast<float>(sinCache.data<T>()[pos * half + col]) * a.scale);
        }
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = fourD ? ((b * heads + h) * seq + s) * headSize
                                     : ((b * seq + s) * heads + h) * headSize;
          rotateHead(px + base, py + base, half, a.rotary.interleaved, cosRow.data(),
                     sinRow.data());
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("RotaryEmbedding", bindKernel(rotaryAttrs, rotaryEmbeddingKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MRotaryEmbedding",
                                bindKernel(mrotaryAttrs, mrotaryEmbeddingKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "RotaryEmbedding",
                                bindKernel(rotaryAttrs, contribRotaryEmbeddingKernel));

}  // namespace
}  // namespace kiln::cpu
