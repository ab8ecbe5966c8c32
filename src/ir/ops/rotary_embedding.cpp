// Shape rules of RotaryEmbedding (opset 23, and com.microsoft's): the output has the input's shape
// and type; input is (B, H, S, D) or (B, S, H * D) with num_heads.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferRotaryEmbedding(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("input must be a float tensor, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != type || ctx.inputType(2) != type)
    ctx.fail("cos_cache and sin_cache must have the input's type");
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 3 && in->size() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + symShapeToString(*in));
  if (in && in->size() == 3 && attrInt(ctx.node(), "num_heads", 0) <= 0)
    ctx.fail("a 3-D input needs num_heads");
  inferSameAsInput0(ctx);
}

// com.microsoft RotaryEmbedding (version 1): input, position_ids (int64, [batch, sequence] or
// [1]), cos_cache, sin_cache; a 3-D input may leave num_heads 0 when heads are rotated whole.
void inferContribRotaryEmbedding(InferContext& ctx) {
  for (size_t i = 0; i < 4; ++i) ctx.requireInput(i);
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32)
    ctx.fail("input must be float32, got " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  if (ctx.inputType(1) != DataType::kInt64)
    ctx.fail("position_ids must be int64, got " + dataTypeName(ctx.inputType(1)));
  if (ctx.inputType(2) != type || ctx.inputType(3) != type)
    ctx.fail("cos_cache and sin_cache must have the input's type");
  if (attrInt(ctx.node(), "is_packed_batching", 0) != 0) {
    ctx.fail("attribute 'is_packed_batching' = 1 is not supported", ErrorCode::kUnsupportedNode);
  }
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 3 && in->size() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + symShapeToString(*in));
  inferSameAsInput0(ctx);
}

// com.microsoft MRotaryEmbedding (version 1, Qwen2-VL's multimodal rotary): input (B, S, N * H)
// or (B, N, S, H), position_ids int64 (3, B, S) (temporal, height and width positions),
// cos_cache and sin_cache (max positions, rotary dim / 2); float32 or float16.
void inferMRotaryEmbedding(InferContext& ctx) {
  for (size_t i = 0; i < 4; ++i) ctx.requireInput(i);
  const DataType type = ctx.inputType(0);
  if (type != DataType::kFloat32 && type != DataType::kFloat16) {
    ctx.fail("input must be float32 or float16, got " + dataTypeName(type),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.inputType(1) != DataType::kInt64)
    ctx.fail("position_ids must be int64, got " + dataTypeName(ctx.inputType(1)));
  if (ctx.inputType(2) != type || ctx.inputType(3) != type)
    ctx.fail("cos_cache and sin_cache must have the input's type");
  const Node& node = ctx.node();
  if (attrInt(node, "is_packed_batching", 0) != 0)
    ctx.fail("attribute 'is_packed_batching' = 1 is not supported", ErrorCode::kUnsupportedNode);
  const std::vector<int64_t> section = attrInts(node, "mrope_section");
  if (section.size() != 3 || section[0] < 0 || section[1] < 0 || section[2] < 0)
    ctx.fail("attribute 'mrope_section' must be 3 non-negative sizes (temporal, height, width)");
  const int64_t layout = attrInt(node, "mrope_layout", 0);
  if (layout != 0 && layout != 1) ctx.fail("attribute 'mrope_layout' must be 0 or 1");
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 3 && in->size() != 4)
    ctx.fail("input must be 3-D or 4-D, got " + symShapeToString(*in));
  if (in && in->size() == 3 && attrInt(node, "num_heads", 0) <= 0)
    ctx.fail("a 3-D input needs num_heads");
  const SymShape* ids = ctx.inputShape(1);
  if (ids && (ids->size() != 3 || ((*ids)[0].isKnown() && (*ids)[0].value != 3)))
    ctx.fail("position_ids must be (3, batch, sequence), got " + symShapeToString(*ids));
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "RotaryEmbedding", 23, 1000, inferRotaryEmbedding});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MRotaryEmbedding", 1, 1000, inferMRotaryEmbedding});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "RotaryEmbedding", 1, 1000, inferContribRotaryEmbedding});

}  // namespace kiln::ir
