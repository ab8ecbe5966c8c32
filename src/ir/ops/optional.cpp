// Type rules of the optional ops: Optional (15+), OptionalHasElement and OptionalGetElement (15,
// and 18, where their input may also be a plain tensor or sequence, or omitted). An optional's
// TypeInfo is its element's (a tensor or a sequence) with isOptional set; at run time its value is
// the element itself, or Tensor::none. At run time a present optional looks like its element, so
// the rules accept a tensor or a sequence wherever an optional is allowed.
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "ir/ops/value_type_text.h"

namespace kiln::ir {

namespace {

// Strips "prefix(" ... ")" from text; false when text is not of that form.
bool unwrap(std::string& text, const std::string& prefix) {
  if (text.size() < prefix.size() + 2 || text.compare(0, prefix.size() + 1, prefix + "(") != 0 ||
      text.back() != ')') {
    return false;
  }
  text = text.substr(prefix.size() + 1, text.size() - prefix.size() - 2);
  return true;
}

DataType dataTypeFromName(const std::string& name) {
  for (int code = 1; code < 64; ++code) {
    const auto dtype = static_cast<DataType>(code);
    if (isSupportedDataType(dtype) && dataTypeName(dtype) == name) return dtype;
  }
  return DataType::kUndefined;
}

}  // namespace

TypeInfo parseValueTypeText(const Node& node, const std::string& text) {
  std::string rest = text;
  TypeInfo type;
  type.isOptional = unwrap(rest, "optional");
  type.isSequence = unwrap(rest, "seq");
  if (unwrap(rest, "tensor")) type.dtype = dataTypeFromName(rest);
  if (type.dtype == DataType::kUndefined) {
    failNode(node, "type '" + text + "' is not a tensor, sequence or optional type kiln supports",
             ErrorCode::kUnsupportedNode);
  }
  return type;
}

namespace {

std::string kindName(const TypeInfo& t) {
  return (t.isOptional ? "optional " : "") +
         std::string(t.isSequence ? "sequence of " : "tensor of ") + dataTypeName(t.dtype);
}

// Optional: wraps its input, or without one makes an empty optional of the `type` attribute.
void inferOptional(InferContext& ctx) {
  const Node& node = ctx.node();
  TypeInfo type;
  if (ctx.hasInput(0)) {
    type = ctx.inputTypeInfo(0);
    if (type.isOptional) ctx.fail("input must be a tensor or a sequence, got an " + kindName(type));
    if (hasAttr(node, "type")) {
      const TypeInfo declared = parseValueTypeText(node, attrString(node, "type"));
      if (declared.isOptional || declared.isSequence != type.isSequence ||
          declared.dtype != type.dtype) {
        ctx.fail("attribute type is " + kindName(declared) + " but the input is a " +
                 kindName(type));
      }
    }
  } else {
    if (!hasAttr(node, "type"))
      ctx.fail("needs an input or the 'type' attribute (the type of an empty optional)");
    type = parseValueTypeText(node, attrString(node, "type"));
    if (type.isOptional)
      ctx.fail("attribute type must be a tensor or sequence type, got " + kindName(type));
  }
  type.isOptional = true;
  ctx.setOutputTypeInfo(0, std::move(type));
}

void inferOptionalHasElement(InferContext& ctx) {
  if (!ctx.hasInput(0) && ctx.opset() < 18) ctx.fail("input is required before opset 18");
  ctx.setOutput(0, DataType::kBool, Shape{});
}

void inferOptionalGetElement(InferContext& ctx) {
  ctx.requireInput(0);
  TypeInfo type = ctx.inputTypeInfo(0);
  type.isOptional = false;
  ctx.setOutputTypeInfo(0, std::move(type));
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Optional", 15, 1000, inferOptional});
KILN_REGISTER_OP_SCHEMA({"", "OptionalHasElement", 15, 1000, inferOptionalHasElement});
KILN_REGISTER_OP_SCHEMA({"", "OptionalGetElement", 15, 1000, inferOptionalGetElement});

}  // namespace kiln::ir
