// Type rules of the sequence ops (opset 11+): SequenceEmpty, SequenceConstruct, SequenceInsert,
// SequenceErase, SequenceAt, SequenceLength, SplitToSequence, ConcatFromSequence and SequenceMap
// (opset 17). A sequence
// value's TypeInfo holds its element dtype and no shape; the tensors taken out of a sequence get
// their shape at run time (from the sequence's value when it is known, else unknown rank).
#include "ir/node_attrs.h"
#include "ir/ops/sequence_map.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireSequence(InferContext& ctx, size_t i) {
  if (!ctx.inputIsSequence(i))
    ctx.fail("input " + std::to_string(i) + " must be a sequence, got a tensor");
}

void requireTensor(InferContext& ctx, size_t i) {
  if (ctx.inputIsSequence(i))
    ctx.fail("input " + std::to_string(i) + " must be a tensor, got a sequence");
}

// An optional position input: a scalar (or one-element) int32/int64 tensor.
void requirePosition(InferContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return;
  requireTensor(ctx, i);
  const DataType t = ctx.inputType(i);
  if (t != DataType::kInt32 && t != DataType::kInt64)
    ctx.fail("position must be int32 or int64, got " + dataTypeName(t));
}

void inferSequenceEmpty(InferContext& ctx) {
  const auto dtype =
      static_cast<DataType>(attrInt(ctx.node(), "dtype", static_cast<int64_t>(DataType::kFloat32)));
  if (!isSupportedDataType(dtype))
    ctx.fail("dtype " + std::to_string(static_cast<int>(dtype)) + " is not a tensor type");
  ctx.setSequenceOutput(0, dtype);
}

void inferSequenceConstruct(InferContext& ctx) {
  if (ctx.numInputs() == 0) ctx.fail("needs at least one input");
  const DataType dtype = ctx.inputType(0);
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    requireTensor(ctx, i);
    if (ctx.inputType(i) != dtype) {
      ctx.fail("input " + std::to_string(i) + " is " + dataTypeName(ctx.inputType(i)) +
               ", input 0 is " + dataTypeName(dtype) + ": a sequence holds one element type");
    }
  }
  ctx.setSequenceOutput(0, dtype);
}

void inferSequenceInsert(InferContext& ctx) {
  requireSequence(ctx, 0);
  requireTensor(ctx, 1);
  requirePosition(ctx, 2);
  if (ctx.inputType(1) != ctx.inputType(0)) {
    ctx.fail("cannot insert a " + dataTypeName(ctx.inputType(1)) + " tensor into a sequence of " +
             dataTypeName(ctx.inputType(0)));
  }
  ctx.setSequenceOutput(0, ctx.inputType(0));
}

void inferSequenceErase(InferContext& ctx) {
  requireSequence(ctx, 0);
  requirePosition(ctx, 1);
  ctx.setSequenceOutput(0, ctx.inputType(0));
}

void inferSequenceAt(InferContext& ctx) {
  requireSequence(ctx, 0);
  ctx.requireInput(1);
  requirePosition(ctx, 1);
  const Tensor* seq = ctx.inputValue(0);
  const auto position = ctx.inputInts(1);
  if (seq && seq->isSequence() && position && position->size() == 1) {
    const auto n = static_cast<int64_t>(seq->sequenceItems().size());
    const int64_t p = position->front() < 0 ? position->front() + n : position->front();
    if (p >= 0 && p < n) {  // out of range: the kernel reports it
      ctx.setOutput(0, ctx.inputType(0), seq->sequenceItems()[static_cast<size_t>(p)].shape());
      return;
    }
  }
  ctx.setOutputType(0, ctx.inputType(0));
}

void inferSequenceLength(InferContext& ctx) {
  requireSequence(ctx, 0);
  ctx.setOutput(0, DataType::kInt64, Shape{});
}

void inferSplitToSequence(InferContext& ctx) {
  requireTensor(ctx, 0);
  if (ctx.hasInput(1)) {
    requireTensor(ctx, 1);
    const DataType t = ctx.inputType(1);
    if (t != DataType::kInt32 && t != DataType::kInt64)
      ctx.fail("split must be int32 or int64, got " + dataTypeName(t));
  }
  if (const SymShape* in = ctx.inputShape(0)) {
    if (in->empty()) ctx.fail("cannot split a scalar");
    normalizeAxis(ctx, attrInt(ctx.node(), "axis", 0), static_cast<int64_t>(in->size()));
  }
  ctx.setSequenceOutput(0, ctx.inputType(0));
}

void inferConcatFromSequence(InferContext& ctx) {
  requireSequence(ctx, 0);
  attrInt(ctx.node(), "axis");  // required
  ctx.setOutputType(0, ctx.inputType(0));
}

// SequenceMap: inputs (input_sequence, additional inputs: sequences of the same length, mapped
// element-wise, or tensors, passed whole to every run); body (one element of each input) ->
// (one element of each output); every output is a sequence.
void inferSequenceMap(InferContext& ctx) {
  const Node& node = ctx.node();
  auto body = attrGraph(node, "body");
  const size_t explicitInputs = node.numExplicitInputs();
  if (explicitInputs < 1 || !ctx.hasInput(0)) ctx.fail("needs the input sequence");
  requireSequence(ctx, 0);
  for (size_t i = 1; i < explicitInputs; ++i) ctx.requireInput(i);
  if (body->inputs.size() != explicitInputs) {
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs; expected " +
             std::to_string(explicitInputs) + " (one per node input)");
  }
  if (body->outputs.size() != ctx.numOutputs()) {
    ctx.fail("body has " + std::to_string(body->outputs.size()) + " outputs but the node has " +
             std::to_string(ctx.numOutputs()));
  }
  std::vector<const TypeInfo*> inputTypes;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    inputTypes.push_back(ctx.hasInput(i) ? &ctx.inputTypeInfo(i) : nullptr);
  const std::vector<TypeInfo> elements = sequenceMapElementTypes(node, *body, inputTypes);
  for (size_t k = 0; k < elements.size(); ++k) {
    if (elements[k].isSequence || elements[k].isOptional) {
      ctx.fail("body output " + std::to_string(k) +
               " must be a tensor (it becomes one element of a sequence)");
    }
    ctx.setSequenceOutput(k, elements[k].dtype);
  }
}

}  // namespace

std::vector<TypeInfo> sequenceMapElementTypes(const Node& node, const Graph& body,
                                              const std::vector<const TypeInfo*>& inputTypes) {
  std::vector<TypeInfo> types;
  bool complete = true;
  for (int id : body.outputs) {
    types.push_back(body.value(id).type);
    complete = complete && types.back().dtype != DataType::kUndefined;
  }
  if (complete) return types;
  Graph copy = body;
  const size_t explicitInputs = node.numExplicitInputs();
  for (size_t i = 0; i < copy.inputs.size() && i < explicitInputs && i < inputTypes.size(); ++i) {
    if (!inputTypes[i]) continue;
    TypeInfo& element = copy.value(copy.inputs[i]).type;
    element.dtype = inputTypes[i]->dtype;  // a sequence's element keeps the body's declared shape
    if (!inputTypes[i]->isSequence) element.shape = inputTypes[i]->shape;
  }
  for (size_t j = 0; j < copy.outerInputs.size() && explicitInputs + j < inputTypes.size(); ++j) {
    if (copy.outerInputs[j] != kNoValue && inputTypes[explicitInputs + j]) {
      copy.value(copy.outerInputs[j]).type = *inputTypes[explicitInputs + j];
    }
  }
  try {
    inferShapes(copy);
  } catch (const Error&) {
    return types;  // the body's own nodes report their errors when it runs
  }
  for (size_t k = 0; k < types.size(); ++k)
    if (types[k].dtype == DataType::kUndefined) types[k] = copy.value(copy.outputs[k]).type;
  return types;
}

KILN_REGISTER_OP_SCHEMA({"", "SequenceEmpty", 11, 1000, inferSequenceEmpty});
KILN_REGISTER_OP_SCHEMA({"", "SequenceConstruct", 11, 1000, inferSequenceConstruct});
KILN_REGISTER_OP_SCHEMA({"", "SequenceInsert", 11, 1000, inferSequenceInsert});
KILN_REGISTER_OP_SCHEMA({"", "SequenceErase", 11, 1000, inferSequenceErase});
KILN_REGISTER_OP_SCHEMA({"", "SequenceAt", 11, 1000, inferSequenceAt});
KILN_REGISTER_OP_SCHEMA({"", "SequenceLength", 11, 1000, inferSequenceLength});
KILN_REGISTER_OP_SCHEMA({"", "SplitToSequence", 11, 1000, inferSplitToSequence});
KILN_REGISTER_OP_SCHEMA({"", "ConcatFromSequence", 11, 1000, inferConcatFromSequence});
KILN_REGISTER_OP_SCHEMA({"", "SequenceMap", 17, 1000, inferSequenceMap});

}  // namespace kiln::ir
