// Spatial geometry of Conv and ConvTranspose (kernel, strides, dilations, pads, output size),
// shared by their shape inference and CPU kernels so both agree on auto_pad and output_shape.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct ConvGeometry {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> padsBegin;
  std::vector<int64_t> padsEnd;
  std::vector<int64_t> outputPadding;  // ConvTranspose only; zeros for Conv
  std::vector<int64_t> output;         // output spatial sizes, -1 where unknown
};

/// Geometry of a Conv node for the given input spatial sizes and the weight's spatial sizes
/// (-1 where unknown; then the dependent outputs are -1 too). Fails naming the node on bad
/// attributes.
ConvGeometry convGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                          const std::vector<int64_t>& weightSpatial);
/// The same for ConvTranspose (output_padding, output_shape and its auto_pad rules).
ConvGeometry convTransposeGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                                   const std::vector<int64_t>& weightSpatial);

}  // namespace kiln::ir
