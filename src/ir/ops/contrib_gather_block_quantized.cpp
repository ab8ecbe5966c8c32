// Shape and type rule of com.microsoft GatherBlockQuantized (version 1), the Gather of a block-wise
// quantized embedding table in weight-only quantized LLM exports. kiln implements uint8 data
// (bits 2, 4 or 8; below 8 packed along the last dimension, low bits first) with gather_axis 0,
// quantize_axis the last dimension (as onnxruntime requires for uint8 data) and float32 scales:
// output = indices.shape + data's logical shape[1:]. Zero points are packed like data, each row
// of blocks starting a new byte.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferGatherBlockQuantized(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  const Node& node = ctx.node();
  if (ctx.inputType(0) != DataType::kUint8) {
    ctx.fail(
        "data must be uint8 (kiln does not implement int4, uint4, float8 or float4 data), got " +
            dataTypeName(ctx.inputType(0)),
        ErrorCode::kUnsupportedNode);
  }
  const DataType ids = ctx.inputType(1);
  if (ids != DataType::kInt32 && ids != DataType::kInt64)
    ctx.fail("indices must be int32 or int64");
  if (ctx.inputType(2) != DataType::kFloat32) {
    ctx.fail("scales must be float32, got " + dataTypeName(ctx.inputType(2)),
             ErrorCode::kUnsupportedNode);
  }
  if (ctx.hasInput(3) && ctx.inputType(3) != DataType::kUint8)
    ctx.fail("zero_points must have data's type uint8");
  const int64_t bits = attrInt(node, "bits", 4), blockSize = attrInt(node, "block_size", 128);
  if (bits != 2 && bits != 4 && bits != 8)
    ctx.fail("attribute 'bits' must be 2, 4 or 8, got " + std::to_string(bits));
  if (blockSize < 16 || (blockSize & (blockSize - 1)) != 0) {
    ctx.fail("attribute 'block_size' must be a power of 2 of at least 16, got " +
             std::to_string(blockSize));
  }
  const SymShape* data = ctx.inputShape(0);
  const SymShape* indices = ctx.inputShape(1);
  if (!data || !indices) return ctx.setOutputType(0, DataType::kFloat32);
  const int64_t rank = static_cast<int64_t>(data->size());
  if (rank < 1) ctx.fail("data must have rank 1 or more");
  if (normalizeAxis(ctx, attrInt(node, "gather_axis", 0), rank) != 0) {
    ctx.fail("attribute 'gather_axis' must be 0 for uint8 data", ErrorCode::kUnsupportedNode);
  }
  if (rank < 2 || normalizeAxis(ctx, attrInt(node, "quantize_axis", 1), rank) != rank - 1) {
    ctx.fail("attribute 'quantize_axis' must be the last dimension for uint8 data",
             ErrorCode::kUnsupportedNode);
  }
  SymShape out = *indices;
  for (int64_t d = 1; d < rank; ++d) {
    Dim dim = (*data)[static_cast<size_t>(d)];
    if (d == rank - 1 && dim.isKnown())
      dim = productDims(ctx.node(), dim, 8 / bits, "the unpacked last dim");  // the packed values
    out.push_back(dim);
  }
  ctx.setOutput(0, DataType::kFloat32, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatherBlockQuantized", 1, 1000,
                         inferGatherBlockQuantized});

}  // namespace kiln::ir
