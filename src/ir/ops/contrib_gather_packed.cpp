// Shape and type rule of com.microsoft GatherPacked (onnxruntime 1.32): rows of a 2-D table of
// GGML block-packed rows, data uint8 (vocab, bytes per row), gathered by int32 / int64 indices
// and dequantized to output_dtype (1 float32, 10 float16, 16 bfloat16, the default): output =
// indices.shape + [K]. packed_type is GGML's type id (ir/ops/ggml_packed_formats.h); K a positive
// multiple of the format's block size, each row K / block size blocks. kiln refuses the IQ2_XXS,
// IQ2_XS, IQ3_XXS and IQ2_S formats onnxruntime also accepts (docs/operators.md).
#include "ir/ops/ggml_packed_formats.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

DataType outputType(const InferContext& ctx) {
  const int64_t dtype = attrInt(ctx.node(), "output_dtype", 16);
  if (dtype == 1) return DataType::kFloat32;
  if (dtype == 10) return DataType::kFloat16;
  if (dtype == 16) return DataType::kBFloat16;
  ctx.fail("attribute 'output_dtype' must be 1 (float32), 10 (float16) or 16 (bfloat16), got " +
           std::to_string(dtype));
}

const GgmlFormat& packedFormat(const InferContext& ctx) {
  const int64_t id = attrInt(ctx.node(), "packed_type");
  const GgmlFormat* format = findGgmlFormat(id);
  if (!format) {
    ctx.fail("attribute 'packed_type' " + std::to_string(id) +
             " is not a GGML type GatherPacked accepts (F32 0, F16 1, BF16 30, Q4_0 2, Q5_0 6, "
             "Q8_0 8, IQ4_NL 20, Q5_K 13, Q6_K 14, IQ4_XS 23; onnxruntime also IQ2_XXS 16, "
             "IQ2_XS 17, IQ3_XXS 18, IQ2_S 22)");
  }
  if (!format->decoded) {
    ctx.fail("packed_type " + std::to_string(id) + " (" + format->name +
                 ") is not implemented: it decodes through GGML's lattice grids of 256-1024 "
                 "entries, which kiln does not carry",
             ErrorCode::kUnsupportedNode);
  }
  return *format;
}

void inferGatherPacked(InferContext& ctx) {
  for (size_t i : {0, 1}) ctx.requireInput(i);
  const Node& node = ctx.node();
  if (ctx.inputType(0) != DataType::kUint8)
    ctx.fail("data must be uint8 (packed bytes), got " + dataTypeName(ctx.inputType(0)));
  const DataType ids = ctx.inputType(1);
  if (ids != DataType::kInt32 && ids != DataType::kInt64)
    ctx.fail("indices must be int32 or int64, got " + dataTypeName(ids));
  const DataType type = outputType(ctx);
  const GgmlFormat& format = packedFormat(ctx);
  const int64_t k = attrInt(node, "K");
  if (k <= 0 || k % format.blockValues != 0) {
    ctx.fail("attribute 'K' must be a positive multiple of " + std::string(format.name) +
             "'s block of " + std::to_string(format.blockValues) + " values, got " +
             std::to_string(k));
  }
  const int64_t rowBytes =
      multiplyDims(node, k / format.blockValues, format.blockBytes, "bytes per row of data");
  const SymShape* data = ctx.inputShape(0);
  if (data && data->size() != 2) {
    ctx.fail("data must be 2-D (vocab, bytes per row), got " + symShapeToString(*data));
  }
  if (data && (*data)[1].isKnown() && (*data)[1].value != rowBytes) {
    ctx.fail("data " + symShapeToString(*data) + " must have " + std::to_string(rowBytes) +
             " bytes per row (" + std::to_string(k / format.blockValues) + " " + format.name +
             " blocks of " + std::to_string(format.blockBytes) + " bytes for K " +
             std::to_string(k) + ")");
  }
  const SymShape* indices = ctx.inputShape(1);
  if (!indices) return ctx.setOutputType(0, type);
  SymShape out = *indices;
  out.push_back(Dim::known(k));
  int64_t known = k;  // the output's known dims multiplied, so that a huge output fails here
  for (const Dim& d : *indices)
    if (d.isKnown()) known = multiplyDims(node, known, d.value, "output size");
  ctx.setOutput(0, type, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "GatherPacked", 1, 1000, inferGatherPacked});

}  // namespace kiln::ir
