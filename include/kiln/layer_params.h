// Changing a layer's parameters after it is made, as TensorRT's typed-layer setters do
// (conv.stride_nd, pool.padding_nd, shuffle.reshape_dims, resize.scales, softmax.axes ...).
//
//   ILayer* pool = network->addPooling(*x, PoolingType::kMAX, {2, 2});
//   PoolingParams p = std::get<PoolingParams>(getLayerParams(*network, *pool));
//   p.strides = {2, 2};
//   Status s = setLayerParams(*network, *pool, p);
#pragma once
#include <variant>

#include "kiln/export.h"
#include "kiln/network.h"
#include "kiln/status.h"

namespace kiln {

/// addActivation's arguments.
struct ActivationParams {
  ActivationType type = ActivationType::kRELU;
  float alpha = 0.0f;
  float beta = 0.0f;
};

/// addSoftMax's axis.
struct SoftMaxParams {
  int64_t axis = -1;
};

/// addConcatenation's axis.
struct ConcatenationParams {
  int64_t axis = 0;
};

/// The parameters of a layer that can change after it is made; std::monostate for the layers
/// that have none (element-wise, matrix multiply, fully connected, constant, plugin, imported).
using LayerParams = std::variant<std::monostate, ConvolutionParams, PoolingParams, ActivationParams,
                                 SoftMaxParams, ShuffleParams, ResizeParams, ConcatenationParams>;

/// The parameters the layer (of `network`) was made with, or last set; std::monostate for a
/// layer of another network.
KILN_API LayerParams getLayerParams(const NetworkDefinition& network, const ILayer& layer);

/// Re-creates the layer (of `network`) with new parameters of its kind: it keeps its name, inputs
/// and output tensors (their consumers and output marks). Fails, leaving the layer as it was, when
/// the parameters are of another kind or make the layer invalid; the Status says why.
KILN_API Status setLayerParams(NetworkDefinition& network, ILayer& layer,
                               const LayerParams& params);

}  // namespace kiln
