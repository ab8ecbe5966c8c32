// Shape rules of BitCast (opset 26): the input's shape with the type `to` of the same width.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferBitCast(InferContext& ctx) {
  const DataType from = ctx.inputType(0);
  const auto to = static_cast<DataType>(attrInt(ctx.node(), "to"));
  if (!isSupportedDataType(to) || to == DataType::kString || from == DataType::kString)
    ctx.fail("BitCast needs non-string types");
  if (dataTypeSize(from) != dataTypeSize(to)) {
    ctx.fail("BitCast needs types of the same width: " + dataTypeName(from) + " to " +
             dataTypeName(to));
  }
  if (const SymShape* in = ctx.inputShape(0))
    ctx.setOutput(0, to, *in);
  else
    ctx.setOutputType(0, to);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "BitCast", 26, 1000, inferBitCast});

}  // namespace kiln::ir
