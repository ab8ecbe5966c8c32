// Shape and type rules of small self-contained com.microsoft ops (version 1):
//   Inverse      X [*, n, n] float16 / float32 / float64 -> its inverse, same shape
//   CDist        A [N, K], B [M, K] float32 / float64, metric sqeuclidean | euclidean -> [N, M]
//   MurmurHash3  X int32 / uint32 / int64 / uint64 / float32 / float64 / string -> Y of X's
//                shape, uint32 when positive (default 1) else int32
//   SampleOp     X -> a copy of X (onnxruntime's example op, float32)
//   CropAndResize X [N, C, H, W] float32, rois [R, 4] (y1, x1, y2, x2 normalized), batch_indices
//                [R] int32, crop_size [2] int32 (height, width) -> [R, C, height, width]
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireType(const InferContext& ctx, size_t i, const char* name,
                 std::initializer_list<DataType> allowed, const char* allowedText) {
  const DataType t = ctx.inputType(i);
  for (DataType a : allowed)
    if (t == a) return;
  ctx.fail(std::string(name) + " must be " + allowedText + ", got " + dataTypeName(t),
           ErrorCode::kUnsupportedNode);
}

void inferInverse(InferContext& ctx) {
  requireType(ctx, 0, "X", {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64},
              "float16, float32 or float64");
  if (const SymShape* x = ctx.inputShape(0)) {
    if (x->size() < 2) ctx.fail("X must be [*, n, n], got " + symShapeToString(*x));
    const Dim& rows = (*x)[x->size() - 2];
    const Dim& cols = x->back();
    if (rows.isKnown() && cols.isKnown() && rows.value != cols.value)
      ctx.fail("X must hold square matrices [*, n, n], got " + symShapeToString(*x));
  }
  inferSameAsInput0(ctx);
}

void inferCDist(InferContext& ctx) {
  requireType(ctx, 0, "A", {DataType::kFloat32, DataType::kFloat64}, "float32 or float64");
  if (ctx.inputType(1) != ctx.inputType(0)) ctx.fail("A and B must have the same type");
  const std::string metric = attrString(ctx.node(), "metric", "sqeuclidean");
  if (metric != "sqeuclidean" && metric != "euclidean") {
    ctx.fail("metric must be sqeuclidean or euclidean, got '" + metric + "'",
             ErrorCode::kUnsupportedNode);
  }
  const SymShape* a = ctx.inputShape(0);
  const SymShape* b = ctx.inputShape(1);
  if (a && a->size() != 2) ctx.fail("A must be [N, K], got " + symShapeToString(*a));
  if (b && b->size() != 2) ctx.fail("B must be [M, K], got " + symShapeToString(*b));
  if (a && b && (*a)[1].isKnown() && (*b)[1].isKnown() && (*a)[1].value != (*b)[1].value) {
    ctx.fail("A " + symShapeToString(*a) + " and B " + symShapeToString(*b) +
             " differ in their last dim");
  }
  ctx.setOutput(0, ctx.inputType(0),
                SymShape{a ? (*a)[0] : Dim::unknown(), b ? (*b)[0] : Dim::unknown()});
}

void inferMurmurHash3(InferContext& ctx) {
  requireType(ctx, 0, "X",
              {DataType::kInt32, DataType::kUint32, DataType::kInt64, DataType::kUint64,
               DataType::kFloat32, DataType::kFloat64, DataType::kString},
              "int32, uint32, int64, uint64, float32, float64 or string");
  const DataType y = attrInt(ctx.node(), "positive", 1) != 0 ? DataType::kUint32 : DataType::kInt32;
  if (const SymShape* x = ctx.inputShape(0)) {
    ctx.setOutput(0, y, *x);
  } else {
    ctx.setOutputType(0, y);
  }
}

void inferCropAndResize(InferContext& ctx) {
  requireType(ctx, 0, "X", {DataType::kFloat32}, "float32");
  if (ctx.inputType(1) != DataType::kFloat32) ctx.fail("rois must be float32");
  if (ctx.inputType(2) != DataType::kInt32) ctx.fail("batch_indices must be int32");
  if (ctx.inputType(3) != DataType::kInt32) ctx.fail("crop_size must be int32");
  const std::string mode = attrString(ctx.node(), "mode", "bilinear");
  if (mode != "bilinear" && mode != "nearest")
    ctx.fail("mode must be bilinear or nearest, got '" + mode + "'");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* rois = ctx.inputShape(1);
  const SymShape* indices = ctx.inputShape(2);
  if (x && x->size() != 4) ctx.fail("X must be [N, C, H, W], got " + symShapeToString(*x));
  if (rois && (rois->size() != 2 || (*rois)[1] != Dim::known(4)))
    ctx.fail("rois must be [num_rois, 4], got " + symShapeToString(*rois));
  if (indices && indices->size() != 1)
    ctx.fail("batch_indices must be [num_rois], got " + symShapeToString(*indices));
  SymShape out{rois ? (*rois)[0] : (indices ? (*indices)[0] : Dim::unknown()),
               x ? (*x)[1] : Dim::unknown(), Dim::unknown(), Dim::unknown()};
  if (const std::optional<std::vector<int64_t>> size = ctx.inputInts(3)) {
    if (size->size() != 2 || (*size)[0] <= 0 || (*size)[1] <= 0)
      ctx.fail("crop_size must hold 2 positive values (height, width)",
               ErrorCode::kInvalidArgument);
    out[2] = Dim::known((*size)[0]);
    out[3] = Dim::known((*size)[1]);
  }
  ctx.setOutput(0, DataType::kFloat32, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "CropAndResize", 1, 1000, inferCropAndResize});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Inverse", 1, 1000, inferInverse});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "CDist", 1, 1000, inferCDist});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MurmurHash3", 1, 1000, inferMurmurHash3});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "SampleOp", 1, 1000, inferSameAsInput0});

}  // namespace kiln::ir
