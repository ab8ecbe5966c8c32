// Shape and type rules of two com.microsoft weight-only 4-bit MatMuls (version 1):
//   MatMulBnb4(A, B uint8 [(N * K + 1) / 2], absmax [ceil(N * K / block_size)]): bitsandbytes'
//     FP4 (quant_type 0) or NF4 (1) values of W [N, K] flattened, two a byte (high nibble
//     first), each block of block_size values scaled by its absmax. transB 1 (default):
//     Y [..., N] = A [..., K] x W^T; transB 0: Y [..., K] = A [..., N] x W. training_mode is
//     read by no CPU kernel.
//   MatMulFpQ4(A, B uint8 [blob], B_shape int64 [2] = [K, N], a constant): MLAS's Q4 blob of
//     W [K, N], column by column, blocks of 32 along K; blk_quant_type 0: 20 bytes a block (float
//     scale, 16 bytes of values, w = (q - 8) * scale), any other value: 21 bytes (scale, uint8
//     zero point, values), as onnxruntime's kernel reads it. Y [..., N] = A [..., K] x W.
// Both float32 (onnxruntime's CPU kernels: float32 only).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireDtype(const InferContext& ctx, size_t i, DataType want, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != want) {
    ctx.fail(std::string(name) + " must be " + dataTypeName(want) + ", got " +
                 dataTypeName(ctx.inputType(i)),
             ErrorCode::kUnsupportedNode);
  }
}

// Input i's element count, when its shape is known.
std::optional<int64_t> knownNumel(const InferContext& ctx, size_t i) {
  const auto shape = ctx.inputConcreteShape(i);
  if (!shape) return std::nullopt;
  return shapeNumel(*shape);
}

void requireNumel(const InferContext& ctx, size_t i, const char* name, int64_t want,
                  const std::string& rule) {
  const auto numel = knownNumel(ctx, i);
  if (numel && *numel != want) {
    ctx.fail(std::string(name) + " holds " + std::to_string(*numel) + " values, where " + rule +
             " = " + std::to_string(want));
  }
}

// Y = A [..., inner] x (an [inner, outer] matrix): A's dimensions with the last one replaced.
void setProductOutput(InferContext& ctx, int64_t inner, int64_t outer) {
  const SymShape* a = ctx.inputShape(0);
  if (!a) return ctx.setOutputType(0, DataType::kFloat32);
  if (a->empty() || (a->back().isKnown() && a->back().value != inner)) {
    ctx.fail("A " + symShapeToString(*a) + " must end in " + std::to_string(inner));
  }
  SymShape y(a->begin(), a->end() - 1);
  y.push_back(Dim::known(outer));
  ctx.setOutput(0, DataType::kFloat32, y);
}

void inferMatMulBnb4(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  const Node& node = ctx.node();
  requireDtype(ctx, 0, DataType::kFloat32, "A");
  requireDtype(ctx, 1, DataType::kUint8, "B");
  requireDtype(ctx, 2, DataType::kFloat32, "absmax");
  const int64_t K = attrInt(node, "K"), N = attrInt(node, "N");
  const int64_t blockSize = attrInt(node, "block_size"), quantType = attrInt(node, "quant_type");
  if (K <= 0 || N <= 0) ctx.fail("attributes 'K' and 'N' must be positive");
  if (quantType != 0 && quantType != 1) {
    ctx.fail("attribute 'quant_type' must be 0 (FP4) or 1 (NF4), got " + std::to_string(quantType));
  }
  if (blockSize < 16 || blockSize > 256 || (blockSize & (blockSize - 1)) != 0) {
    ctx.fail("attribute 'block_size' must be 16, 32, 64, 128 or 256, got " +
             std::to_string(blockSize));
  }
  const int64_t numel = multiplyDims(node, N, K, "N x K");
  requireNumel(ctx, 1, "B", ceilDiv(numel, 2), "(N x K + 1) / 2");
  requireNumel(ctx, 2, "absmax", ceilDiv(numel, blockSize), "ceil(N x K / block_size)");
  const bool transB = attrInt(node, "transB", 1) != 0;
  setProductOutput(ctx, transB ? K : N, transB ? N : K);
}

void inferMatMulFpQ4(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.requireInput(i);
  requireDtype(ctx, 0, DataType::kFloat32, "A");
  requireDtype(ctx, 1, DataType::kUint8, "B");
  requireDtype(ctx, 2, DataType::kInt64, "B_shape");
  const auto bShape = ctx.inputInts(2);
  if (!bShape) {
    ctx.fail("B_shape must be a constant (kiln sizes the weights when the engine is built)",
             ErrorCode::kUnsupportedNode);
  }
  if (bShape->size() != 2 || (*bShape)[0] <= 0 || (*bShape)[1] <= 0) {
    ctx.fail("B_shape must hold two positive values [K, N], got " + std::to_string(bShape->size()) +
             " values");
  }
  const int64_t K = (*bShape)[0], N = (*bShape)[1];
  const SymShape* b = ctx.inputShape(1);
  if (b && b->size() != 1) ctx.fail("B must be a 1-D blob, got " + symShapeToString(*b));
  const int64_t blobBytes = attrInt(ctx.node(), "blk_quant_type", 1) == 0 ? 20 : 21;
  const int64_t blocks = ceilDiv(K, 32);
  requireNumel(ctx, 1, "B", multiplyDims(ctx.node(), N, blocks * blobBytes, "blob bytes"),
               "N x ceil(K / 32) x " + std::to_string(blobBytes));
  setProductOutput(ctx, K, N);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MatMulBnb4", 1, 1000, inferMatMulBnb4});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MatMulFpQ4", 1, 1000, inferMatMulFpQ4});

}  // namespace kiln::ir
