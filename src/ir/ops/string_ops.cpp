// Shape rules of the string ops: StringNormalizer (10), StringConcat, StringSplit and
// RegexFullMatch (20).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireString(InferContext& ctx, size_t i) {
  if (ctx.inputType(i) != DataType::kString)
    ctx.fail("input " + std::to_string(i) + " must be string, got " +
             dataTypeName(ctx.inputType(i)));
}

void inferStringNormalizer(InferContext& ctx) {
  requireString(ctx, 0);
  const std::string action = attrString(ctx.node(), "case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    ctx.fail("case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
  const SymShape* in = ctx.inputShape(0);
  if (in && in->size() != 1 && !(in->size() == 2 && (!(*in)[0].isKnown() || (*in)[0].value == 1))) {
    ctx.fail("input must be [C] or [1, C], got " + symShapeToString(*in));
  }
  // Removing stopwords changes the element count.
  if (!in)
    ctx.setOutputType(0, DataType::kString);
  else if (in->size() == 1)
    ctx.setOutput(0, DataType::kString, SymShape{Dim::unknown()});
  else
    ctx.setOutput(0, DataType::kString, SymShape{Dim::known(1), Dim::unknown()});
}

void inferStringConcat(InferContext& ctx) {
  requireString(ctx, 0);
  requireString(ctx, 1);
  inferBroadcast(ctx);
}

void inferStringSplit(InferContext& ctx) {
  requireString(ctx, 0);
  if (hasAttr(ctx.node(), "maxsplit") && attrInt(ctx.node(), "maxsplit") < 0)
    ctx.fail("maxsplit must not be negative");
  const SymShape* in = ctx.inputShape(0);
  if (!in) {
    ctx.setOutputType(0, DataType::kString);
    ctx.setOutputType(1, DataType::kInt64);
    return;
  }
  SymShape out = *in;
  out.push_back(Dim::unknown());  // the most substrings any element splits into
  ctx.setOutput(0, DataType::kString, out);
  ctx.setOutput(1, DataType::kInt64, *in);
}

void inferRegexFullMatch(InferContext& ctx) {
  requireString(ctx, 0);
  attrString(ctx.node(), "pattern");
  const SymShape* in = ctx.inputShape(0);
  if (in)
    ctx.setOutput(0, DataType::kBool, *in);
  else
    ctx.setOutputType(0, DataType::kBool);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "StringNormalizer", 10, 1000, inferStringNormalizer});
KILN_REGISTER_OP_SCHEMA({"", "StringConcat", 20, 1000, inferStringConcat});
KILN_REGISTER_OP_SCHEMA({"", "StringSplit", 20, 1000, inferStringSplit});
KILN_REGISTER_OP_SCHEMA({"", "RegexFullMatch", 20, 1000, inferRegexFullMatch});

}  // namespace kiln::ir
