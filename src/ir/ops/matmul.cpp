// Shape rules of MatMul (numpy matmul semantics), MatMulInteger and Gemm.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

bool isMatmulType(DataType t) {
  switch (t) {
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUint32:
    case DataType::kUint64:
      return true;
    default:
      return false;
  }
}

void requireSameMatmulType(InferContext& ctx, size_t count) {
  const DataType t = ctx.inputType(0);
  if (!isMatmulType(t)) ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  for (size_t i = 1; i < count; ++i) {
    if (ctx.hasInput(i) && ctx.inputType(i) != t) {
      ctx.fail("input types differ: " + dataTypeName(t) + " and " + dataTypeName(ctx.inputType(i)));
    }
  }
}

void checkSameDim(const InferContext& ctx, const Dim& a, const Dim& b, const char* what) {
  if (a.isKnown() && b.isKnown() && a.value != b.value) {
    ctx.fail(std::string(what) + " mismatch: " + a.toString() + " vs " + b.toString());
  }
}

// [..., M, K] x [..., K, N] -> [broadcast(...), M, N]; a 1-D operand gains a unit dim that the
// output then drops.
void inferMatMulShape(InferContext& ctx, DataType t) {
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(1);
  if (!a || !b) {
    ctx.setOutputType(0, t);
    return;
  }
  if (a->empty() || b->empty()) ctx.fail("MatMul inputs must not be scalars");
  SymShape pa = *a, pb = *b;
  if (pa.size() == 1) pa.insert(pa.begin(), Dim::known(1));
  if (pb.size() == 1) pb.push_back(Dim::known(1));
  checkSameDim(ctx, pa.back(), pb[pb.size() - 2], "inner dimension");
  SymShape out = broadcastSymShapes(ctx, SymShape(pa.begin(), pa.end() - 2),
                                    SymShape(pb.begin(), pb.end() - 2));
  if (a->size() > 1) out.push_back(pa[pa.size() - 2]);
  if (b->size() > 1) out.push_back(pb.back());
  ctx.setOutput(0, t, out);
}

void inferMatMul(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  requireSameMatmulType(ctx, 2);
  inferMatMulShape(ctx, ctx.inputType(0));
}

// 8-bit operands, optional zero points of the same types, int32 result.
void inferMatMulInteger(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  for (size_t i = 0; i < 2; ++i) {
    const DataType t = ctx.inputType(i);
    if (t != DataType::kUint8 && t != DataType::kInt8)
      ctx.fail("expects int8 or uint8 inputs, got " + dataTypeName(t), ErrorCode::kUnsupportedNode);
    if (ctx.hasInput(i + 2) && ctx.inputType(i + 2) != t)
      ctx.fail("zero point type differs from its input's");
  }
  inferMatMulShape(ctx, DataType::kInt32);
}

void inferGemm(InferContext& ctx) {
  ctx.requireInput(0);
  ctx.requireInput(1);
  if (ctx.opset() < 11 && !ctx.hasInput(2)) ctx.fail("input C is required before opset 11");
  requireSameMatmulType(ctx, 3);
  const DataType t = ctx.inputType(0);
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(1);
  if (a && a->size() != 2) ctx.fail("input A must be 2-D, got " + symShapeToString(*a));
  if (b && b->size() != 2) ctx.fail("input B must be 2-D, got " + symShapeToString(*b));
  const bool transA = attrInt(ctx.node(), "transA", 0) != 0;
  const bool transB = attrInt(ctx.node(), "transB", 0) != 0;
  const Dim m = a ? (*a)[transA ? 1 : 0] : Dim::unknown();
  const Dim n = b ? (*b)[transB ? 0 : 1] : Dim::unknown();
  if (a && b) checkSameDim(ctx, (*a)[transA ? 0 : 1], (*b)[transB ? 1 : 0], "inner dimension");
  const SymShape out = {m, n};
  if (ctx.hasInput(2)) {
    // C broadcasts one way onto [M, N].
    const SymShape* c = ctx.inputShape(2);
    if (c) {
      if (c->size() > 2) ctx.fail("input C must have rank <= 2");
      for (size_t i = 0; i < c->size(); ++i) {
        const Dim& cd = (*c)[i];
        const Dim& od = out[2 - c->size() + i];
        if (cd.isKnown() && cd.value != 1 && od.isKnown() && cd.value != od.value) {
          ctx.fail("input C of shape " + symShapeToString(*c) + " does not broadcast to " +
                   symShapeToString(out));
        }
      }
    }
  }
  ctx.setOutput(0, t, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "MatMul", 1, 1000, inferMatMul});
KILN_REGISTER_OP_SCHEMA({"", "Gemm", 1, 1000, inferGemm});
KILN_REGISTER_OP_SCHEMA({"", "MatMulInteger", 10, 1000, inferMatMulInteger});

}  // namespace kiln::ir
