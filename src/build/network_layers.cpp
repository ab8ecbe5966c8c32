// NetworkDefinition::add*: each layer becomes ONNX nodes (opset 17) and constant values.
#include <algorithm>
#include <numeric>
#include <optional>

#include "build/layer_transaction.h"
#include "build/network_impl.h"
#include "engine/api_guard.h"

namespace kiln {

namespace {

template <typename Fn>
ILayer* addLayer(NetworkDefinition::Impl& impl, const std::string& type, Fn&& build) {
  ILayer* result = nullptr;
  (void)guardStatus(&impl.logger, [&] {
    LayerTransaction tx(impl, type);
    result = build(tx);
  });
  return result;
}

// A per-spatial-dim parameter: the given values, or `fallback` for each dim when empty.
std::vector<int64_t> perDim(const LayerTransaction& tx, const Shape& given, size_t n,
                            int64_t fallback, const char* what) {
  if (given.empty()) return std::vector<int64_t>(n, fallback);
  if (given.size() != n) {
    tx.fail(std::string(what) + " has " + std::to_string(given.size()) + " values for " +
            std::to_string(n) + " spatial dims");
  }
  return given;
}

std::vector<int64_t> symmetricPads(const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

Tensor floatScalar(float v) { return Tensor::fromVector<float>(DataType::kFloat32, {}, {v}); }

Weights weightsOf(const Tensor& t) { return Weights{t.dtype(), t.raw(), t.numel()}; }

}  // namespace

ILayer* NetworkDefinition::addConvolution(ITensor& input, int64_t nbOutputMaps,
                                          const Shape& kernelSize, const Weights& kernel,
                                          const Weights& bias, const ConvolutionParams& params) {
  ILayer* layer = addLayer(*impl_, "Conv", [&](LayerTransaction& tx) {
    int x = tx.input(input);
    Shape dims = input.getDimensions();
    const size_t spatial = kernelSize.size();
    if (spatial == 0) tx.fail("kernelSize is empty");
    if (dims.size() != spatial + 2) {
      tx.fail("input '" + input.getName() + "' has rank " + std::to_string(dims.size()) + "; a " +
              std::to_string(spatial) + "-D convolution needs rank " + std::to_string(spatial + 2));
    }
    if (dims[1] < 0) tx.fail("input '" + input.getName() + "' needs a fixed channel dim (index 1)");
    if (nbOutputMaps <= 0 || params.groups <= 0 || dims[1] % params.groups ||
        nbOutputMaps % params.groups) {
      tx.fail("channels " + std::to_string(dims[1]) + " and output maps " +
              std::to_string(nbOutputMaps) + " must be positive multiples of groups " +
              std::to_string(params.groups));
    }
    Shape wshape{nbOutputMaps, dims[1] / params.groups};
    wshape.insert(wshape.end(), kernelSize.begin(), kernelSize.end());
    std::vector<int> inputs{
        x, tx.constant("weight", tensorFromWeights(kernel, wshape, "kernel weights"))};
    if (bias.count)
      inputs.push_back(tx.constant("bias", tensorFromWeights(bias, {nbOutputMaps}, "bias")));
    ir::AttributeMap attrs{
        {"kernel_shape", std::vector<int64_t>(kernelSize)},
        {"strides", perDim(tx, params.strides, spatial, 1, "strides")},
        {"pads", symmetricPads(perDim(tx, params.padding, spatial, 0, "padding"))},
        {"dilations", perDim(tx, params.dilations, spatial, 1, "dilations")},
        {"group", params.groups},
    };
    return tx.commit(tx.node("Conv", inputs, std::move(attrs)));
  });
  if (!layer) return nullptr;
  // The weights as the layer holds them (shared storage), for re-creating it with other params.
  const ir::Node& conv = impl_->graph.nodes[static_cast<size_t>(impl_->layers.back().nodes.back())];
  Tensor kernelValues = *impl_->graph.value(conv.inputs[1]).constant;
  std::optional<Tensor> biasValues;
  if (conv.inputs.size() > 2) biasValues = *impl_->graph.value(conv.inputs[2]).constant;
  return impl_->withParams(layer, params,
                           [this, nbOutputMaps, kernelSize, kernelValues, biasValues](
                               const std::vector<ITensor*>& in, const LayerParams& p) {
                             return addConvolution(*in.at(0), nbOutputMaps, kernelSize,
                                                   weightsOf(kernelValues),
                                                   biasValues ? weightsOf(*biasValues) : Weights{},
                                                   std::get<ConvolutionParams>(p));
                           });
}

ILayer* NetworkDefinition::addPooling(ITensor& input, PoolingType type, const Shape& windowSize,
                                      const PoolingParams& params) {
  const char* op = type == PoolingType::kMAX ? "MaxPool" : "AveragePool";
  ILayer* layer = addLayer(*impl_, op, [&](LayerTransaction& tx) {
    int x = tx.input(input);
    const size_t spatial = windowSize.size();
    if (spatial == 0) tx.fail("windowSize is empty");
    ir::AttributeMap attrs{
        {"kernel_shape", std::vector<int64_t>(windowSize)},
        {"strides", perDim(tx, params.strides, spatial, 1, "strides")},
        {"pads", symmetricPads(perDim(tx, params.padding, spatial, 0, "padding"))},
    };
    if (type == PoolingType::kAVERAGE)
      attrs["count_include_pad"] = int64_t{params.averageCountExcludesPadding ? 0 : 1};
    return tx.commit(tx.node(op, {x}, std::move(attrs)));
  });
  return impl_->withParams(
      layer, params,
      [this, type, windowSize](const std::vector<ITensor*>& in, const LayerParams& p) {
        return addPooling(*in.at(0), type, windowSize, std::get<PoolingParams>(p));
      });
}

ILayer* NetworkDefinition::addActivation(ITensor& input, ActivationType type, float alpha,
                                         float beta) {
  struct Spec {
    const char* op;
    ir::AttributeMap attrs;
  };
  Spec spec{"Relu", {}};
  switch (type) {
    case ActivationType::kRELU:
      spec = {"Relu", {}};
      break;
    case ActivationType::kSIGMOID:
      spec = {"Sigmoid", {}};
      break;
    case ActivationType::kTANH:
      spec = {"Tanh", {}};
      break;
    case ActivationType::kLEAKY_RELU:
      spec = {"LeakyRelu", {{"alpha", alpha}}};
      break;
    case ActivationType::kELU:
      spec = {"Elu", {{"alpha", alpha}}};
      break;
    case ActivationType::kSELU:
      spec = {"Selu", {{"alpha", alpha}, {"gamma", beta}}};
      break;
    case ActivationType::kSOFTSIGN:
      spec = {"Softsign", {}};
      break;
    case ActivationType::kSOFTPLUS:
      spec = {"Softplus", {}};
      break;
    case ActivationType::kCLIP:
      spec = {"Clip", {}};
      break;
    case ActivationType::kHARD_SIGMOID:
      spec = {"HardSigmoid", {{"alpha", alpha}, {"beta", beta}}};
      break;
    case ActivationType::kTHRESHOLDED_RELU:
      spec = {"ThresholdedRelu", {{"alpha", alpha}}};
      break;
  }
  ILayer* layer = addLayer(*impl_, spec.op, [&](LayerTransaction& tx) {
    std::vector<int> inputs{tx.input(input)};
    if (type == ActivationType::kCLIP) {  // opset 11+: min and max are inputs
      inputs.push_back(tx.constant("min", floatScalar(alpha)));
      inputs.push_back(tx.constant("max", floatScalar(beta)));
    }
    return tx.commit(tx.node(spec.op, inputs, spec.attrs));
  });
  return impl_->withParams(layer, ActivationParams{type, alpha, beta},
                           [this](const std::vector<ITensor*>& in, const LayerParams& p) {
                             const auto& a = std::get<ActivationParams>(p);
                             return addActivation(*in.at(0), a.type, a.alpha, a.beta);
                           });
}

ILayer* NetworkDefinition::addElementWise(ITensor& a, ITensor& b, ElementWiseOperation op) {
  const char* name = "Add";
  switch (op) {
    case ElementWiseOperation::kSUM:
      name = "Add";
      break;
    case ElementWiseOperation::kPROD:
      name = "Mul";
      break;
    case ElementWiseOperation::kMAX:
      name = "Max";
      break;
    case ElementWiseOperation::kMIN:
      name = "Min";
      break;
    case ElementWiseOperation::kSUB:
      name = "Sub";
      break;
    case ElementWiseOperation::kDIV:
      name = "Div";
      break;
    case ElementWiseOperation::kPOW:
      name = "Pow";
      break;
  }
  return addLayer(*impl_, name, [&](LayerTransaction& tx) {
    int ia = tx.input(a);
    int ib = tx.input(b);
    return tx.commit(tx.node(name, {ia, ib}));
  });
}

ILayer* NetworkDefinition::addMatrixMultiply(ITensor& a, MatrixOperation opA, ITensor& b,
                                             MatrixOperation opB) {
  return addLayer(*impl_, "MatMul", [&](LayerTransaction& tx) {
    auto operand = [&](ITensor& t, MatrixOperation op) {
      int id = tx.input(t);
      if (op == MatrixOperation::kNONE) return id;
      size_t rank = t.getDimensions().size();
      if (!t.hasShape() || rank < 2)
        tx.fail("transposing '" + t.getName() + "' needs a known rank of at least 2");
      std::vector<int64_t> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[rank - 1], perm[rank - 2]);
      return tx.node("Transpose", {id}, {{"perm", perm}})[0];
    };
    int ia = operand(a, opA);
    int ib = operand(b, opB);
    return tx.commit(tx.node("MatMul", {ia, ib}));
  });
}

ILayer* NetworkDefinition::addFullyConnected(ITensor& input, int64_t nbOutputs,
                                             const Weights& kernel, const Weights& bias) {
  return addLayer(*impl_, "Gemm", [&](LayerTransaction& tx) {
    int x = tx.input(input);
    Shape dims = input.getDimensions();
    if (!input.hasShape() || dims.size() < 2)
      tx.fail("input '" + input.getName() + "' needs a known rank of at least 2");
    int64_t k = 1;
    for (size_t i = 1; i < dims.size(); ++i) {
      if (dims[i] < 0)
        tx.fail("input '" + input.getName() + "' needs fixed dims after the batch dim");
      k *= dims[i];
    }
    if (nbOutputs <= 0) tx.fail("nbOutputs must be positive");
    if (dims.size() > 2) x = tx.node("Flatten", {x}, {{"axis", int64_t{1}}})[0];
    std::vector<int> inputs{
        x, tx.constant("weight", tensorFromWeights(kernel, {nbOutputs, k}, "kernel weights"))};
    if (bias.count)
      inputs.push_back(tx.constant("bias", tensorFromWeights(bias, {nbOutputs}, "bias")));
    return tx.commit(tx.node("Gemm", inputs, {{"transB", int64_t{1}}}));
  });
}

ILayer* NetworkDefinition::addSoftMax(ITensor& input, int64_t axis) {
  ILayer* layer = addLayer(*impl_, "Softmax", [&](LayerTransaction& tx) {
    return tx.commit(tx.node("Softmax", {tx.input(input)}, {{"axis", axis}}));
  });
  return impl_->withParams(layer, SoftMaxParams{axis},
                           [this](const std::vector<ITensor*>& in, const LayerParams& p) {
                             return addSoftMax(*in.at(0), std::get<SoftMaxParams>(p).axis);
                           });
}

ILayer* NetworkDefinition::addShuffle(ITensor& input, const ShuffleParams& params) {
  const bool any =
      !params.firstTranspose.empty() || params.hasReshape || !params.secondTranspose.empty();
  ILayer* layer = addLayer(*impl_, any ? "Shuffle" : "Identity", [&](LayerTransaction& tx) {
    int x = tx.input(input);
    if (!any) return tx.commit(tx.node("Identity", {x}));
    if (!params.firstTranspose.empty())
      x = tx.node("Transpose", {x}, {{"perm", params.firstTranspose}})[0];
    if (params.hasReshape) {
      Tensor shape = Tensor::fromVector<int64_t>(
          DataType::kInt64, {static_cast<int64_t>(params.reshapeDims.size())}, params.reshapeDims);
      x = tx.node("Reshape", {x, tx.constant("shape", shape)})[0];
    }
    if (!params.secondTranspose.empty())
      x = tx.node("Transpose", {x}, {{"perm", params.secondTranspose}})[0];
    return tx.commit({x});
  });
  return impl_->withParams(layer, params,
                           [this](const std::vector<ITensor*>& in, const LayerParams& p) {
                             return addShuffle(*in.at(0), std::get<ShuffleParams>(p));
                           });
}

ILayer* NetworkDefinition::addConcatenation(const std::vector<ITensor*>& inputs, int64_t axis) {
  ILayer* layer = addLayer(*impl_, "Concat", [&](LayerTransaction& tx) {
    if (inputs.empty()) tx.fail("needs at least one input");
    std::vector<int> ids;
    for (ITensor* t : inputs) {
      if (!t) tx.fail("an input is null");
      ids.push_back(tx.input(*t));
    }
    return tx.commit(tx.node("Concat", ids, {{"axis", axis}}));
  });
  // The layer's inputs are its distinct tensors (in order of first use); the same tensor may be
  // several operands.
  if (!layer) return nullptr;
  std::vector<int> distinct;
  std::vector<size_t> operandInput;
  for (ITensor* t : inputs) {
    const int id = valueIdIn(*this, *t);
    auto it = std::find(distinct.begin(), distinct.end(), id);
    if (it == distinct.end()) it = distinct.insert(distinct.end(), id);
    operandInput.push_back(static_cast<size_t>(it - distinct.begin()));
  }
  return impl_->withParams(
      layer, ConcatenationParams{axis},
      [this, operandInput](const std::vector<ITensor*>& in, const LayerParams& p) {
        std::vector<ITensor*> operands;
        for (size_t k : operandInput) operands.push_back(in.at(k));
        return addConcatenation(operands, std::get<ConcatenationParams>(p).axis);
      });
}

ILayer* NetworkDefinition::addConstant(const Shape& dims, const Weights& weights) {
  return addLayer(*impl_, "Constant", [&](LayerTransaction& tx) {
    for (int64_t d : dims)
      if (d < 0) tx.fail("dims must be fixed, got " + shapeToString(dims));
    return tx.commit({tx.constant("value", tensorFromWeights(weights, dims, "constant weights"))});
  });
}

ILayer* NetworkDefinition::addResize(ITensor& input, const ResizeParams& params) {
  ILayer* layer = addLayer(*impl_, "Resize", [&](LayerTransaction& tx) {
    int x = tx.input(input);
    if (params.scales.empty() == params.outputDims.empty())
      tx.fail("give either scales or outputDims");
    const char* mode = params.mode == ResizeMode::kNEAREST  ? "nearest"
                       : params.mode == ResizeMode::kLINEAR ? "linear"
                                                            : "cubic";
    std::vector<int> inputs{x, ir::kNoValue};
    if (!params.scales.empty()) {
      inputs.push_back(tx.constant(
          "scales",
          Tensor::fromVector<float>(DataType::kFloat32,
                                    {static_cast<int64_t>(params.scales.size())}, params.scales)));
    } else {
      inputs.push_back(ir::kNoValue);
      inputs.push_back(tx.constant(
          "sizes", Tensor::fromVector<int64_t>(DataType::kInt64,
                                               {static_cast<int64_t>(params.outputDims.size())},
                                               params.outputDims)));
    }
    ir::AttributeMap attrs{{"mode", std::string(mode)},
                           {"coordinate_transformation_mode", params.coordinateTransformation},
                           {"nearest_mode", params.nearestMode}};
    return tx.commit(tx.node("Resize", inputs, std::move(attrs)));
  });
  return impl_->withParams(layer, params,
                           [this](const std::vector<ITensor*>& in, const LayerParams& p) {
                             return addResize(*in.at(0), std::get<ResizeParams>(p));
                           });
}

}  // namespace kiln
