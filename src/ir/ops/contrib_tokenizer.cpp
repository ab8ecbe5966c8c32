// Shape and type rule of com.microsoft Tokenizer (version 1): X string [C] or [N, C] -> Y string
// [C, D] or [N, C, D], D the most tokens of any string (plus the two marks when mark = 1), found
// by separators (regular expressions that split) or tokenexp (a regular expression that matches
// the tokens); mincharnum, mark and pad_value are required (backends/cpu/kernels/
// contrib_tokenizer.cpp).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferTokenizer(InferContext& ctx) {
  if (ctx.inputType(0) != DataType::kString)
    ctx.fail("X must be string, got " + dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  for (const char* attr : {"mark", "pad_value", "mincharnum"})
    if (!hasAttr(ctx.node(), attr)) ctx.fail(std::string("attribute '") + attr + "' is required");
  if (attrInt(ctx.node(), "mincharnum") < 1) ctx.fail("attribute 'mincharnum' must be positive");
  const bool hasSeparators = hasAttr(ctx.node(), "separators");
  if (!hasSeparators && !hasAttr(ctx.node(), "tokenexp"))
    ctx.fail("attribute 'separators' or 'tokenexp' is required");
  if (hasSeparators ? attrStrings(ctx.node(), "separators").empty()
                    : attrString(ctx.node(), "tokenexp").empty())
    ctx.fail(hasSeparators ? "attribute 'separators' is empty" : "attribute 'tokenexp' is empty");
  const SymShape* x = ctx.inputShape(0);
  if (!x) return ctx.setOutputType(0, DataType::kString);
  if (x->size() != 1 && x->size() != 2)
    ctx.fail("X must be [C] or [N, C], got " + symShapeToString(*x));
  SymShape y = *x;
  y.push_back(Dim::unknown());
  ctx.setOutput(0, DataType::kString, y);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "Tokenizer", 1, 1000, inferTokenizer});

}  // namespace kiln::ir
