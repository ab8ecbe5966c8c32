// The NCHWc layout pass's decisions (see nchwc_rules.h).
#include "opt/nchwc_rules.h"

#include <algorithm>
#include <set>

#include "ir/node_attrs.h"
#include "ir/ops/nchwc.h"
#include "ir/ops/nchwc_groups.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {

std::optional<int64_t> nchwChannels(const ir::Graph& graph, int valueId) {
  if (!isFloat32(graph, valueId)) return std::nullopt;
  const auto& shape = graph.value(valueId).type.shape;
  if (!shape || shape->size() != 4 || !(*shape)[1].isKnown()) return std::nullopt;
  return (*shape)[1].value;
}

bool wantsNchwc(const ir::Graph& graph, const ir::Node& node) {
  const bool isConv = (node.domain.empty() && node.opType == "Conv") ||
                      (node.domain == "kiln" && node.opType == "FusedConv");
  if (!isConv || node.inputs.size() < 2 || node.outputs.size() != 1 ||
      !isFloat32(graph, node.outputs[0]))
    return false;
  const std::optional<int64_t> inChannels = nchwChannels(graph, node.inputs[0]);
  const Tensor* w = constantValue(graph, node.inputs[1]);
  if (!inChannels || !w || w->dtype() != DataType::kFloat32 || w->rank() != 4) return false;
  if (node.inputs.size() > 2 && node.inputs[2] != ir::kNoValue && !isFloat32(graph, node.inputs[2]))
    return false;
  const int64_t outChannels = w->dim(0);
  const int64_t group = ir::attrInt(node, "group", 1);
  if (group == 1) {
    return outChannels >= kMinNchwcConvChannels && w->dim(1) == *inChannels;
  }
  if (w->dim(1) * group != *inChannels) return false;
  if (w->dim(1) == 1 && outChannels == group) return group >= kMinNchwcConvChannels;  // depthwise
  return outChannels >= kMinNchwcConvChannels &&
         ir::nchwcGroupSlices(*inChannels, outChannels, group).slices > 0;
}

bool isBlockedUnaryOp(const std::string& opType) {
  static const std::set<std::string> ops = {
      "Relu",      "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
      "LeakyRelu", "Elu",  "Selu",    "Celu",        "Softplus",  "Mish",
      "Gelu",      "Erf",  "Neg",     "Abs",         "Identity"};
  return ops.count(opType) > 0;
}

bool isBlockedBinaryOp(const std::string& opType) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul",  "Div", "Max",
                                            "Min", "Sum", "Mean", "Pow", "PRelu"};
  return ops.count(opType) > 0;
}

OperandForm plainOperandForm(const ir::Graph& graph, int valueId, int64_t channels) {
  if (!isFloat32(graph, valueId)) return OperandForm::kUnsupported;
  const auto& shape = graph.value(valueId).type.shape;
  if (!shape || shape->size() > 4) return OperandForm::kUnsupported;
  if (std::all_of(shape->begin(), shape->end(),
                  [](const ir::Dim& d) { return d.isKnown() && d.value == 1; })) {
    return OperandForm::kOneElement;
  }
  if (const Tensor* t = constantValue(graph, valueId)) {
    const int64_t c = t->rank() >= 3 ? t->dim(t->rank() - 3) : 1;
    return c == channels || c == 1 ? OperandForm::kConstant : OperandForm::kUnsupported;
  }
  return nchwChannels(graph, valueId) == channels ? OperandForm::kReorder
                                                  : OperandForm::kUnsupported;
}

Tensor blockConstant(const Tensor& constant) {
  Shape d(4 - constant.rank(), 1);
  for (int64_t s : constant.shape()) d.push_back(s);
  const int64_t a = d[0], c = d[1], pixels = d[2] * d[3];
  if (c == 1) return constant.reshaped({a, 1, d[2], d[3], 1});
  const int64_t blocks = ir::nchwcBlocks(c);
  Tensor out(DataType::kFloat32,
             {a, blocks, d[2], d[3], ir::kNchwcBlock});  // zero-initialized padding
  const float* src = constant.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < a; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) {
        dst[((n * blocks + ch / ir::kNchwcBlock) * pixels + p) * ir::kNchwcBlock +
            ch % ir::kNchwcBlock] = src[(n * c + ch) * pixels + p];
      }
  return out;
}

bool reducesSpatialKeepingDims(const ir::Graph& graph, const ir::Node& node) {
  if (ir::attrInt(node, "keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (node.opset >= kReduceAxesInputOpset) {
    const Tensor* t = node.inputs.size() > 1 ? constantValue(graph, node.inputs[1]) : nullptr;
    if (!t || t->dtype() != DataType::kInt64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  } else {
    if (!ir::hasAttr(node, "axes")) return false;
    axes = ir::attrInts(node, "axes");
  }
  for (int64_t& axis : axes) axis = axis < 0 ? axis + 4 : axis;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

}  // namespace kiln::opt
