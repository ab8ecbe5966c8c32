// Shape rules of the ai.onnx.ml predictors and feature transforms that skl2onnx writes:
// LinearClassifier / LinearRegressor, SVMClassifier / SVMRegressor, TreeEnsembleClassifier /
// TreeEnsembleRegressor (ml opsets 1 to 4; 5 replaced them with TreeEnsemble), Scaler,
// Normalizer, Imputer, OneHotEncoder, FeatureVectorizer and CategoryMapper.
#include <numeric>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

/// N of X (N, F); 1 for a 1-D X.
Dim rowsOf(InferContext& ctx) {
  const SymShape* x = ctx.inputShape(0);
  if (!x) return Dim::unknown();
  if (x->size() != 1 && x->size() != 2)
    ctx.fail("X must be (N, features) or (features), got " + symShapeToString(*x));
  return x->size() == 1 ? Dim::known(1) : (*x)[0];
}

DataType labelType(InferContext& ctx, const char* strings, const char* ints) {
  const bool s = hasAttr(ctx.node(), strings), i = hasAttr(ctx.node(), ints);
  if (s == i)
    ctx.fail(std::string("needs exactly one of the attributes '") + strings + "' and '" + ints +
             "'");
  return s ? DataType::kString : DataType::kInt64;
}

int64_t labelCount(InferContext& ctx, const char* strings, const char* ints) {
  return labelType(ctx, strings, ints) == DataType::kString
             ? static_cast<int64_t>(attrStrings(ctx.node(), strings).size())
             : static_cast<int64_t>(attrInts(ctx.node(), ints).size());
}

void setClassifierOutputs(InferContext& ctx, DataType labels, int64_t width) {
  const Dim n = rowsOf(ctx);
  ctx.setOutput(0, labels, SymShape{n});
  if (ctx.numOutputs() > 1) ctx.setOutput(1, DataType::kFloat32, SymShape{n, Dim::known(width)});
}

void inferLinearClassifier(InferContext& ctx) {
  const DataType labels = labelType(ctx, "classlabels_strings", "classlabels_ints");
  const int64_t count = labelCount(ctx, "classlabels_strings", "classlabels_ints");
  const int64_t scores = hasAttr(ctx.node(), "intercepts")
                             ? static_cast<int64_t>(attrFloats(ctx.node(), "intercepts").size())
                             : count;
  setClassifierOutputs(ctx, labels, scores == 1 && count == 2 ? 2 : scores);
}

void inferLinearRegressor(InferContext& ctx) {
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{rowsOf(ctx), Dim::known(attrInt(ctx.node(), "targets", 1))});
}

void inferSvmClassifier(InferContext& ctx) {
  const DataType labels = labelType(ctx, "classlabels_strings", "classlabels_ints");
  const int64_t classes = labelCount(ctx, "classlabels_strings", "classlabels_ints");
  const std::vector<int64_t> perClass = attrInts(ctx.node(), "vectors_per_class", {});
  const bool svc = std::accumulate(perClass.begin(), perClass.end(), int64_t{0}) > 0;
  const bool proba = svc && !attrFloats(ctx.node(), "prob_a", {}).empty();
  const int64_t pairs = classes * (classes - 1) / 2;
  setClassifierOutputs(ctx, labels, !svc || proba ? classes : (classes > 2 ? pairs : 2));
}

void inferSvmRegressor(InferContext& ctx) {
  ctx.setOutput(0, DataType::kFloat32, SymShape{rowsOf(ctx), Dim::known(1)});
}

void inferTreeEnsembleClassifier(InferContext& ctx) {
  setClassifierOutputs(ctx, labelType(ctx, "classlabels_strings", "classlabels_int64s"),
                       labelCount(ctx, "classlabels_strings", "classlabels_int64s"));
}

void inferTreeEnsembleRegressor(InferContext& ctx) {
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{rowsOf(ctx), Dim::known(attrInt(ctx.node(), "n_targets", 1))});
}

/// Output 0: float, the shape of X.
void inferFloatOfInputShape(InferContext& ctx) {
  if (const SymShape* x = ctx.inputShape(0))
    ctx.setOutput(0, DataType::kFloat32, *x);
  else
    ctx.setOutputType(0, DataType::kFloat32);
}

void inferOneHotEncoder(InferContext& ctx) {
  const bool strings = hasAttr(ctx.node(), "cats_strings");
  if (strings == hasAttr(ctx.node(), "cats_int64s"))
    ctx.fail("needs exactly one of the attributes 'cats_strings' and 'cats_int64s'");
  const int64_t cats = strings
                           ? static_cast<int64_t>(attrStrings(ctx.node(), "cats_strings").size())
                           : static_cast<int64_t>(attrInts(ctx.node(), "cats_int64s").size());
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, DataType::kFloat32);
  SymShape out = *x;
  out.push_back(Dim::known(cats));
  ctx.setOutput(0, DataType::kFloat32, out);
}

void inferFeatureVectorizer(InferContext& ctx) {
  const std::vector<int64_t> dims = attrInts(ctx.node(), "inputdimensions");
  if (dims.size() != ctx.numInputs())
    ctx.fail("attribute 'inputdimensions' has " + std::to_string(dims.size()) + " entries for " +
             std::to_string(ctx.numInputs()) + " inputs");
  const SymShape* x = ctx.inputShape(0);
  const Dim n = !x ? Dim::unknown() : (x->size() <= 1 ? Dim::known(1) : (*x)[0]);
  ctx.setOutput(0, DataType::kFloat32,
                SymShape{n, Dim::known(std::accumulate(dims.begin(), dims.end(), int64_t{0}))});
}

void inferCategoryMapper(InferContext& ctx) {
  const DataType in = ctx.inputType(0);
  if (in != DataType::kString && in != DataType::kInt64)
    ctx.fail("X must be string or int64, got " + dataTypeName(in));
  const DataType out = in == DataType::kString ? DataType::kInt64 : DataType::kString;
  if (const SymShape* x = ctx.inputShape(0))
    ctx.setOutput(0, out, *x);
  else
    ctx.setOutputType(0, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "LinearClassifier", 1, 1000, inferLinearClassifier});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "LinearRegressor", 1, 1000, inferLinearRegressor});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "SVMClassifier", 1, 1000, inferSvmClassifier});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "SVMRegressor", 1, 1000, inferSvmRegressor});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "TreeEnsembleClassifier", 1, 4,
                         inferTreeEnsembleClassifier});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "TreeEnsembleRegressor", 1, 4, inferTreeEnsembleRegressor});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "Scaler", 1, 1000, inferFloatOfInputShape});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "Normalizer", 1, 1000, inferFloatOfInputShape});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "Imputer", 1, 1000, inferSameAsInput0});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "OneHotEncoder", 1, 1000, inferOneHotEncoder});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "FeatureVectorizer", 1, 1000, inferFeatureVectorizer});
KILN_REGISTER_OP_SCHEMA({"ai.onnx.ml", "CategoryMapper", 1, 1000, inferCategoryMapper});

}  // namespace kiln::ir
