// Shape rules of TfIdfVectorizer (opset 9): X [C] or [B, C] of strings or integers ->
// float Y [O] or [B, O], where O = max(ngram_indexes) + 1.
#include <algorithm>

#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferTfIdfVectorizer(InferContext& ctx) {
  const DataType type = ctx.inputType(0);
  if (type != DataType::kString && type != DataType::kInt32 && type != DataType::kInt64) {
    ctx.fail("X must be string, int32 or int64, got " + dataTypeName(type));
  }
  const std::string mode = attrString(ctx.node(), "mode");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    ctx.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  const std::vector<int64_t> indexes = attrInts(ctx.node(), "ngram_indexes");
  if (indexes.empty()) ctx.fail("ngram_indexes must not be empty");
  const int64_t outputSize = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 1 && in->size() != 2)
    ctx.fail("X must be [C] or [B, C], got " + symShapeToString(*in));
  if (in && in->size() == 2)
    ctx.setOutput(0, DataType::kFloat32, SymShape{(*in)[0], Dim::known(outputSize)});
  else
    ctx.setOutput(0, DataType::kFloat32, SymShape{Dim::known(outputSize)});
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "TfIdfVectorizer", 9, 1000, inferTfIdfVectorizer});

}  // namespace kiln::ir
