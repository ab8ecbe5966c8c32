// Shape and type rules of the variadic elementwise operators Max, Min, Sum and Mean.
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

// Every input has the same numeric type; the output is their multidirectional broadcast.
void inferVariadic(InferContext& ctx) {
  if (ctx.numInputs() == 0) ctx.fail("needs at least one input");
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) ctx.fail("input " + std::to_string(i) + " is missing");
    if (ctx.inputType(i) != ctx.inputType(0)) {
      ctx.fail("input types differ: " + dataTypeName(ctx.inputType(0)) + " and " +
               dataTypeName(ctx.inputType(i)));
    }
  }
  const DataType t = ctx.inputType(0);
  if (t == DataType::kString || t == DataType::kBool)
    ctx.fail("does not accept " + dataTypeName(t), ErrorCode::kUnsupportedNode);
  inferBroadcast(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Max", 1, 1000, inferVariadic});
KILN_REGISTER_OP_SCHEMA({"", "Min", 1, 1000, inferVariadic});
KILN_REGISTER_OP_SCHEMA({"", "Sum", 1, 1000, inferVariadic});
KILN_REGISTER_OP_SCHEMA({"", "Mean", 1, 1000, inferVariadic});

}  // namespace kiln::ir
