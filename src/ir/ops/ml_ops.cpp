// Shape rules of the ai.onnx.ml ops kiln runs: Binarizer, ArrayFeatureExtractor, LabelEncoder,
// TreeEnsemble and ZipMap.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferBinarizer(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (type == DataType::kString || type == DataType::kBool)
    ctx.fail("does not accept " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  inferSameAsInput0(ctx);
}

// Y = X[..., indices]: X's leading dims (1 for a 1-D X) and one entry per index.
void inferArrayFeatureExtractor(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (ctx.inputType(1) != DataType::kInt64) ctx.fail("indices must be int64");
  const SymShape* x = ctx.inputShape(0);
  const SymShape* idx = ctx.inputShape(1);
  if (!x || !idx) {
    ctx.setOutputType(0, type);
    return;
  }
  Dim count = Dim::known(1);
  for (const Dim& d : *idx)
    count = d.isKnown() ? productDims(ctx.node(), count, d.value, "the number of indices")
                        : Dim::unknown();
  SymShape out = x->size() <= 1 ? SymShape{Dim::known(1)} : SymShape(x->begin(), x->end() - 1);
  out.push_back(count);
  ctx.setOutput(0, type, out);
}

/// The output type of LabelEncoder: that of its values attribute.
DataType labelEncoderValueType(InferContext& ctx) {
  const Node& n = ctx.node();
  if (hasAttr(n, "values_strings")) return DataType::kString;
  if (hasAttr(n, "values_int64s")) return DataType::kInt64;
  if (hasAttr(n, "values_floats")) return DataType::kFloat32;
  if (hasAttr(n, "values_tensor")) return attrTensor(n, "values_tensor").dtype();
  ctx.fail("needs one of values_strings, values_int64s, values_floats or values_tensor");
}

void inferLabelEncoder(InferContext& ctx) {
  const DataType out = labelEncoderValueType(ctx);
  const SymShape* in = ctx.inputShape(0);
  if (in)
    ctx.setOutput(0, out, *in);
  else
    ctx.setOutputType(0, out);
}

// TreeEnsemble (ml opset 5): X (N, F) -> (N, n_targets) of X's type.
void inferTreeEnsemble(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (!isFloatingPoint(type))
    ctx.fail("X must be a float tensor, got " + dataTypeName(type), ErrorCode::kUnsupportedNode);
  if (attrInt(ctx.node(), "post_transform", 0) != 0)
    ctx.fail("only post_transform NONE (0) is supported", ErrorCode::kUnsupportedNode);
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 2) ctx.fail("X must be (N, features), got " + symShapeToString(*x));
  ctx.setOutput(
      0, type,
      SymShape{x ? (*x)[0] : Dim::unknown(), Dim::known(attrInt(ctx.node(), "n_targets"))});
}

// ZipMap: X (N, C) or (C) float -> a sequence of N (1 for a 1-D X) maps, class label -> score.
void inferZipMap(InferContext& ctx) {
  const Node& n = ctx.node();
  const bool ints = hasAttr(n, "classlabels_int64s"), strings = hasAttr(n, "classlabels_strings");
  if (ints == strings) ctx.fail("needs exactly one of classlabels_int64s and classlabels_strings");
  if (ctx.inputType(0) != DataType::kFloat32) {
    ctx.fail("X must be float32, got " + dataTypeName(ctx.inputType(0)), ErrorCode::kInvalidModel);
  }
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 1 && x->size() != 2)
    ctx.fail("X must be 1-D or 2-D, got " + symShapeToString(*x));
  TypeInfo out;
  out.dtype = DataType::kFloat32;
  out.isSequence = true;
  out.mapKeyType = ints ? DataType::kInt64 : DataType::kString;
  ctx.setOutputTypeInfo(0, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "ZipMap", 1, 1000, inferZipMap});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "TreeEnsemble", 5, 1000, inferTreeEnsemble});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "Binarizer", 1, 1000, inferBinarizer});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "ArrayFeatureExtractor", 1, 1000,
                         inferArrayFeatureExtractor});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "LabelEncoder", 1, 1000, inferLabelEncoder});

}  // namespace kiln::ir
