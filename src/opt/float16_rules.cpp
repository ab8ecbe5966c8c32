#include "opt/float16_rules.h"

#include <set>

#include "ir/node_attrs.h"

namespace kiln::opt {
namespace {

// Default-domain ops whose outputs are continuous in their float inputs (or only move them):
// computing them on float32 copies of float16 values is at least as accurate as float16.
const std::set<std::string>& continuousOps() {
  static const std::set<std::string> kOps = {
      // arithmetic and activations
      "Abs", "Acos", "Acosh", "Add", "Asin", "Asinh", "Atan", "Atanh", "Celu", "Clip", "Cos",
      "Cosh", "CumSum", "Div", "Elu", "Erf", "Exp", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu",
      "Log", "Max", "Mean", "Min", "Mish", "Mul", "Neg", "Pow", "PRelu", "Reciprocal", "Relu",
      "Selu", "Sigmoid", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum", "Swish",
      "Tan", "Tanh", "Where",
      // linear layers and normalizations
      "Attention", "BatchNormalization", "Conv", "ConvTranspose", "DequantizeLinear", "Einsum",
      "Gemm", "GroupNormalization", "GRU", "InstanceNormalization", "LayerNormalization", "LRN",
      "LSTM", "MatMul", "MeanVarianceNormalization", "RMSNormalization", "RNN",
      // pools, reductions, softmax
      "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "ReduceL1", "ReduceL2",
      "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
      "ReduceSumSquare", "Softmax", "LogSoftmax",
      // data movement and shape reading
      "Concat", "DepthToSpace", "Dropout", "Expand", "Flatten", "Gather", "GatherElements",
      "GatherND", "Identity", "Pad", "Reshape", "Resize", "ScatterElements", "ScatterND", "Shape",
      "Size", "Slice", "SpaceToDepth", "Split", "Squeeze", "Tile", "Transpose", "Trilu",
      "Unsqueeze", "Upsample"};
  return kOps;
}

bool hasSubgraph(const ir::Node& node) {
  for (const auto& [name, attr] : node.attrs) {
    if (std::holds_alternative<std::shared_ptr<ir::Graph>>(attr) ||
        std::holds_alternative<std::vector<std::shared_ptr<ir::Graph>>>(attr))
      return true;
  }
  return false;
}

bool isFloat16Or32(DataType t) { return t == DataType::kFloat16 || t == DataType::kFloat32; }

}  // namespace

bool computesWideInFloat32(const ir::Graph& graph, const ir::Node& node) {
  if (!node.domain.empty() || node.plugin || hasSubgraph(node) || node.explicitInputs >= 0)
    return false;
  if (node.opType == "Cast") {
    if (node.inputs.empty() || node.inputs[0] == ir::kNoValue || node.outputs.empty() ||
        node.outputs[0] == ir::kNoValue)
      return false;
    const DataType from = graph.value(node.inputs[0]).type.dtype;
    const DataType to = graph.value(node.outputs[0]).type.dtype;
    // To float16 from anything, or float16 to float32: the float32 result is one rounding fewer.
    return to == DataType::kFloat16 || (from == DataType::kFloat16 && isFloat16Or32(to));
  }
  // A float16 fill value widens exactly (widenFloat16Interior widens the attribute).
  if (node.opType == "ConstantOfShape") {
    auto it = node.attrs.find("value");
    return it != node.attrs.end() && std::holds_alternative<Tensor>(it->second) &&
           std::get<Tensor>(it->second).dtype() == DataType::kFloat16;
  }
  // MaxPool's Indices output picks among ties that float16 rounding makes.
  if (node.opType == "MaxPool") return node.outputs.size() < 2 || node.outputs[1] == ir::kNoValue;
  return continuousOps().count(node.opType) > 0;
}

}  // namespace kiln::opt
