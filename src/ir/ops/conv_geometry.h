// Spatial geometry of Conv and ConvTranspose (kernel, strides, dilations, pads, output size),
// shared by their shape inference and CPU kernels so both agree on auto_pad and output_shape.
#pragma once
#include <cstdint>
#include <vector>

#include "core/internal_api.h"
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
KILN_INTERNAL_API ConvGeometry convGeometry(const Node& node,
                                            const std::vector<int64_t>& inputSpatial,
                                            const std::vector<int64_t>& weightSpatial);
/// The same for ConvTranspose (output_padding, output_shape and its auto_pad rules).
ConvGeometry convTransposeGeometry(const Node& node, const std::vector<int64_t>& inputSpatial,
                                   const std::vector<int64_t>& weightSpatial);

/// Whether kernel tap `tap` of one spatial axis reads the input (rather than padding) for some
/// output position in [firstOut, lastOut]: o * stride - padBegin + tap * dilation in [0, in).
inline bool tapReadsInput(int64_t tap, int64_t firstOut, int64_t lastOut, int64_t stride,
                          int64_t dilation, int64_t padBegin, int64_t in) {
  const int64_t lowest = firstOut * stride + tap * dilation - padBegin,
                highest = lastOut * stride + tap * dilation - padBegin;
  if (highest < 0 || lowest >= in) return false;
  const int64_t firstInside = lowest >= 0 ? 0 : (-lowest + stride - 1) / stride;  // steps to 0
  return lowest + firstInside * stride < in;
}

}  // namespace kiln::ir
