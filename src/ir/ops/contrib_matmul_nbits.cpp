// Shape and type rules of com.microsoft MatMulNBits (version 1), the weight-only quantized MatMul
// of LLM exports: Y [..., N] = A [..., K] x W^T + bias with W [N, K] dequantized block by block
// along K: w = (q - zero_point) * scale, q the `bits`-bit values of B [N, blocks, block_size * bits
// / 8] (low bits first), scales [N * blocks], zero_points packed like B ([N * ceil(blocks * bits /
// 8)], default 2^(bits - 1)) or of the scales' type. Float32 A; g_idx is not supported.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferMatMulNBits(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  const Node& node = ctx.node();
  if (ctx.inputType(0) != DataType::kFloat32) {
    ctx.fail("A must be float32 (kiln implements MatMulNBits for float32), got " +
                 dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.inputType(1) != DataType::kUint8)
    ctx.fail("B must be uint8, got " + dataTypeName(ctx.inputType(1)));
  if (ctx.inputType(2) != DataType::kFloat32)
    ctx.fail("scales must be float32, got " + dataTypeName(ctx.inputType(2)));
  if (ctx.hasInput(4)) ctx.fail("input 'g_idx' is not supported", ErrorCode::kUnsupportedNode);
  const int64_t bits = attrInt(node, "bits", 4), blockSize = attrInt(node, "block_size", 0);
  const int64_t K = attrInt(node, "K", 0), N = attrInt(node, "N", 0);
  if (bits != 2 && bits != 4 && bits != 8)
    ctx.fail("attribute 'bits' must be 2, 4 or 8, got " + std::to_string(bits),
             ErrorCode::kUnsupportedNode);
  if (blockSize < 16 || blockSize > (int64_t{1} << 24) || (blockSize & (blockSize - 1)) != 0) {
    ctx.fail("attribute 'block_size' must be a power of 2 from 16 to 2^24, got " +
             std::to_string(blockSize));
  }
  if (K <= 0 || N <= 0) ctx.fail("attributes 'K' and 'N' must be positive");
  const SymShape* b = ctx.inputShape(1);
  const int64_t blocks = ceilDiv(K, blockSize);
  if (b && b->size() == 3 && (*b)[0].isKnown() && (*b)[1].isKnown() && (*b)[2].isKnown() &&
      ((*b)[0].value != N || (*b)[1].value != blocks || (*b)[2].value != blockSize * bits / 8)) {
    ctx.fail("B " + symShapeToString(*b) + " must be [N, blocks, block_size * bits / 8] = [" +
             std::to_string(N) + ", " + std::to_string(blocks) + ", " +
             std::to_string(blockSize * bits / 8) + "]");
  }
  if (ctx.hasInput(5) && ctx.inputType(5) != DataType::kFloat32) ctx.fail("bias must be float32");
  const SymShape* a = ctx.inputShape(0);
  if (!a) return ctx.setOutputType(0, DataType::kFloat32);
  if (a->empty() || (a->back().isKnown() && a->back().value != K)) {
    ctx.fail("A " + symShapeToString(*a) + " must end in K = " + std::to_string(K));
  }
  SymShape y(a->begin(), a->end() - 1);
  y.push_back(Dim::known(N));
  ctx.setOutput(0, DataType::kFloat32, y);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MatMulNBits", 1, 1000, inferMatMulNBits});

}  // namespace kiln::ir
