// Shape and type rules of Einsum.
#include "ir/ops/einsum_equation.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void inferEinsum(InferContext& ctx) {
  if (ctx.numInputs() == 0) ctx.fail("needs at least one input");
  const DataType dtype = ctx.inputType(0);
  if (dtype == DataType::kString || dtype == DataType::kBool) {
    ctx.fail("does not accept " + dataTypeName(dtype), ErrorCode::kUnsupportedNode);
  }
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.inputType(i) != dtype) ctx.fail("inputs must share one type");
    const SymShape* s = ctx.inputShape(i);
    if (!s) {
      ctx.setOutputType(0, dtype);
      return;
    }
    ranks.push_back(static_cast<int64_t>(s->size()));
  }
  const EinsumEquation eq = parseEinsum(ctx.node(), attrString(ctx.node(), "equation"), ranks);
  // A label's size: a known size other than 1 wins (size 1 broadcasts), then a named symbol,
  // then an unknown dim, then 1.
  auto strength = [](const Dim& d) {
    return d.isKnown() ? (d.value != 1 ? 3 : 0) : (d.symbol.empty() ? 1 : 2);
  };
  std::vector<Dim> sizes(static_cast<size_t>(eq.labelCount), Dim::known(1));
  for (size_t i = 0; i < eq.inputLabels.size(); ++i) {
    const SymShape& shape = *ctx.inputShape(i);
    for (size_t a = 0; a < shape.size(); ++a) {
      const Dim& d = shape[a];
      Dim& size = sizes[static_cast<size_t>(eq.inputLabels[i][a])];
      if (strength(d) == 3 && strength(size) == 3 && d.value != size.value) {
        ctx.fail("einsum label sizes disagree: " + d.toString() + " and " + size.toString());
      }
      if (strength(d) > strength(size)) size = d;
    }
  }
  SymShape out;
  for (int l : eq.outputLabels) out.push_back(sizes[static_cast<size_t>(l)]);
  ctx.setOutput(0, dtype, out);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "Einsum", 12, 1000, inferEinsum});

}  // namespace kiln::ir
