// Shape inference for the control-flow ops If, Loop and Scan. Their outputs come from subgraphs
// whose types are only declared, so inference is deliberately loose: agreeing declarations are
// kept, disagreeing dims become unknown. The kernels allocate their outputs themselves.
#include <optional>

#include "ir/op_schema.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {

namespace {

// The dims two types agree on; nullopt (unknown rank) when either rank is unknown or they differ.
std::optional<SymShape> mergeShapes(const std::optional<SymShape>& a,
                                    const std::optional<SymShape>& b) {
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  SymShape merged(*a);
  for (size_t i = 0; i < merged.size(); ++i)
    if (!(merged[i] == (*b)[i])) merged[i] = Dim::unknown();
  return merged;
}

void setOutputInfo(InferContext& ctx, size_t i, DataType dtype,
                   const std::optional<SymShape>& shape) {
  if (shape)
    ctx.setOutput(i, dtype, *shape);
  else
    ctx.setOutputType(i, dtype);
}

std::optional<SymShape> inputSymShape(const InferContext& ctx, size_t i) {
  const SymShape* s = ctx.inputShape(i);
  return s ? std::optional<SymShape>(*s) : std::nullopt;
}

// The body's output types: as declared, or, where a declaration lacks the dtype, inferred over a
// copy of the body with `inputTypes` for its inputs and the node's implicit input types for its
// outer inputs. Only at build time: at run time the kernel allocates the outputs itself.
std::vector<TypeInfo> bodyOutputTypes(const InferContext& ctx, const Graph& body,
                                      const std::vector<TypeInfo>& inputTypes) {
  std::vector<TypeInfo> types;
  bool complete = true;
  for (int id : body.outputs) {
    types.push_back(body.value(id).type);
    complete = complete && types.back().dtype != DataType::kUndefined;
  }
  bool runTime = true;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    runTime = runTime && (!ctx.hasInput(i) || ctx.inputValue(i));
  if (complete || runTime || inputTypes.size() != body.inputs.size()) return types;
  Graph copy = body;
  for (size_t i = 0; i < inputTypes.size(); ++i) copy.value(copy.inputs[i]).type = inputTypes[i];
  const size_t implicitBegin = ctx.node().numExplicitInputs();
  for (size_t j = 0; j < copy.outerInputs.size() && implicitBegin + j < ctx.numInputs(); ++j) {
    if (copy.outerInputs[j] != kNoValue && ctx.hasInput(implicitBegin + j)) {
      copy.value(copy.outerInputs[j]).type =
          TypeInfo{ctx.inputType(implicitBegin + j), inputSymShape(ctx, implicitBegin + j),
                   ctx.inputIsSequence(implicitBegin + j)};
    }
  }
  try {
    inferShapes(copy);
  } catch (const Error&) {
    return types;  // the body's own nodes report their errors when it runs
  }
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i].dtype == DataType::kUndefined) types[i] = copy.value(copy.outputs[i]).type;
  return types;
}

void requireOutputCount(InferContext& ctx, const Graph& body, size_t expected, const char* what) {
  if (body.outputs.size() != expected) {
    ctx.fail(std::string(what) + " has " + std::to_string(body.outputs.size()) +
             " outputs; expected " + std::to_string(expected));
  }
}

void inferIf(InferContext& ctx) {
  const Node& node = ctx.node();
  auto thenGraph = attrGraph(node, "then_branch");
  auto elseGraph = attrGraph(node, "else_branch");
  if (node.numExplicitInputs() != 1 || !ctx.hasInput(0))
    ctx.fail("takes exactly one input, the condition");
  requireOutputCount(ctx, *thenGraph, ctx.numOutputs(), "then_branch");
  requireOutputCount(ctx, *elseGraph, ctx.numOutputs(), "else_branch");
  const std::vector<TypeInfo> thenTypes = bodyOutputTypes(ctx, *thenGraph, {});
  const std::vector<TypeInfo> elseTypes = bodyOutputTypes(ctx, *elseGraph, {});
  for (size_t i = 0; i < ctx.numOutputs(); ++i) {
    const TypeInfo& a = thenTypes[i];
    const TypeInfo& b = elseTypes[i];
    if (a.dtype != b.dtype && a.dtype != DataType::kUndefined && b.dtype != DataType::kUndefined) {
      ctx.fail("output " + std::to_string(i) + " is " + dataTypeName(a.dtype) +
               " in then_branch but " + dataTypeName(b.dtype) + " in else_branch");
    }
    const DataType dtype = a.dtype != DataType::kUndefined ? a.dtype : b.dtype;
    if (a.isSequence || b.isSequence || a.isOptional || b.isOptional) {  // passed through as is
      ctx.setOutputTypeInfo(
          i, TypeInfo{dtype, mergeShapes(a.shape, b.shape), a.isSequence || b.isSequence,
                      a.isOptional || b.isOptional});
      continue;
    }
    setOutputInfo(ctx, i, dtype, mergeShapes(a.shape, b.shape));
  }
}

// Loop: inputs (M, cond, v_initial x N); body (iter, cond, v x N) -> (cond, v x N, scan x K);
// outputs (v_final x N, scan x K).
void inferLoop(InferContext& ctx) {
  const Node& node = ctx.node();
  auto body = attrGraph(node, "body");
  const size_t explicitInputs = node.numExplicitInputs();
  if (explicitInputs < 2) ctx.fail("needs the inputs M and cond (either may be empty)");
  const size_t carried = explicitInputs - 2;
  if (body->inputs.size() != carried + 2) {
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs; expected " +
             std::to_string(carried + 2) +
             " (iteration number, condition and the loop-carried values)");
  }
  if (body->outputs.size() < carried + 1 || ctx.numOutputs() != body->outputs.size() - 1) {
    ctx.fail("body has " + std::to_string(body->outputs.size()) +
             " outputs, which does not match " + std::to_string(carried) +
             " loop-carried values and " + std::to_string(ctx.numOutputs()) + " node outputs");
  }
  // Loop-carried values may change shape between iterations: the body sees only their dtypes.
  std::vector<TypeInfo> bodyInputs{TypeInfo{DataType::kInt64, SymShape{}},
                                   TypeInfo{DataType::kBool, SymShape{}}};
  for (size_t i = 0; i < carried; ++i) {
    ctx.requireInput(2 + i);
    bodyInputs.push_back(TypeInfo{ctx.inputType(2 + i), std::nullopt, ctx.inputIsSequence(2 + i)});
  }
  const std::vector<TypeInfo> bodyOutputs = bodyOutputTypes(ctx, *body, bodyInputs);
  for (size_t i = 0; i < carried; ++i) {
    const TypeInfo& bodyOut = bodyOutputs[1 + i];
    if (ctx.inputIsSequence(2 + i)) {
      ctx.setSequenceOutput(i, ctx.inputType(2 + i));
      continue;
    }
    setOutputInfo(ctx, i, ctx.inputType(2 + i),
                  mergeShapes(inputSymShape(ctx, 2 + i), bodyOut.shape));
  }
  for (size_t k = carried; k < ctx.numOutputs(); ++k) {
    const TypeInfo& bodyOut = bodyOutputs[1 + k];
    std::optional<SymShape> shape;
    if (bodyOut.shape) {
      shape = SymShape{Dim::unknown()};
      shape->insert(shape->end(), bodyOut.shape->begin(), bodyOut.shape->end());
    }
    setOutputInfo(ctx, k, bodyOut.dtype, shape);
  }
}

// Scan 9+: inputs (state x N, scan x M); body (state x N, scan element x M) -> (state x N,
// scan element x K); outputs (final state x N, scan x K). Scan 8 adds a leading optional
// sequence_lens input and a batch axis 0 on every input and output.
void inferScan(InferContext& ctx) {
  const Node& node = ctx.node();
  auto body = attrGraph(node, "body");
  const bool batched = ctx.opset() < 9;
  const size_t first = batched ? 1 : 0;
  const size_t explicitInputs = node.numExplicitInputs();
  const int64_t numScanInputs = attrInt(node, "num_scan_inputs");
  if (numScanInputs < 1 || static_cast<size_t>(numScanInputs) + first > explicitInputs) {
    ctx.fail("num_scan_inputs " + std::to_string(numScanInputs) + " does not fit its " +
             std::to_string(explicitInputs) + " inputs");
  }
  const size_t states = explicitInputs - first - static_cast<size_t>(numScanInputs);
  if (body->inputs.size() != explicitInputs - first) {
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs; expected " +
             std::to_string(explicitInputs - first));
  }
  if (body->outputs.size() != ctx.numOutputs() || ctx.numOutputs() < states) {
    ctx.fail("body has " + std::to_string(body->outputs.size()) + " outputs but the node has " +
             std::to_string(ctx.numOutputs()));
  }
  std::vector<TypeInfo> bodyInputs;
  for (size_t i = first; i < explicitInputs; ++i) {
    ctx.requireInput(i);
    bodyInputs.push_back(TypeInfo{ctx.inputType(i), std::nullopt});
  }
  const std::vector<TypeInfo> bodyOutputs = bodyOutputTypes(ctx, *body, bodyInputs);
  for (size_t i = 0; i < states; ++i) {
    const TypeInfo& bodyOut = bodyOutputs[i];
    std::optional<SymShape> bodyShape = bodyOut.shape;
    if (batched && bodyShape) bodyShape->insert(bodyShape->begin(), Dim::unknown());
    setOutputInfo(ctx, i, ctx.inputType(first + i),
                  mergeShapes(inputSymShape(ctx, first + i), bodyShape));
  }
  // The scan length, when the first scan input's shape knows it.
  Dim length = Dim::unknown();
  const SymShape* scanShape = ctx.inputShape(first + states);
  const std::vector<int64_t> inputAxes =
      batched ? std::vector<int64_t>{} : attrInts(node, "scan_input_axes", {});
  if (scanShape) {
    int64_t axis = batched ? 1 : (inputAxes.empty() ? 0 : inputAxes[0]);
    if (axis < 0) axis += static_cast<int64_t>(scanShape->size());
    if (axis >= 0 && axis < static_cast<int64_t>(scanShape->size())) length = (*scanShape)[axis];
  }
  const std::vector<int64_t> outputAxes =
      batched ? std::vector<int64_t>{} : attrInts(node, "scan_output_axes", {});
  for (size_t k = states; k < ctx.numOutputs(); ++k) {
    const TypeInfo& bodyOut = bodyOutputs[k];
    if (!bodyOut.shape) {
      ctx.setOutputType(k, bodyOut.dtype);
      continue;
    }
    SymShape shape = *bodyOut.shape;
    int64_t axis = k - states < outputAxes.size() ? outputAxes[k - states] : 0;
    const int64_t rank = static_cast<int64_t>(shape.size()) + 1;
    if (axis < -rank || axis >= rank)
      ctx.fail("scan_output_axes value " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    shape.insert(shape.begin() + axis, length);
    if (batched)
      shape.insert(shape.begin(),
                   ctx.inputShape(first) ? (*ctx.inputShape(first))[0] : Dim::unknown());
    ctx.setOutput(k, bodyOut.dtype, shape);
  }
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"", "If", 1, 1000, inferIf});
KILN_REGISTER_OP_SCHEMA({"", "Loop", 1, 1000, inferLoop});
KILN_REGISTER_OP_SCHEMA({"", "Scan", 8, 1000, inferScan});

}  // namespace kiln::ir
