// Window geometry shared by the pooling ops' shape inference and their CPU kernels:
// kernel/stride/dilation/pad attributes, auto_pad and ceil_mode resolved per spatial dim.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct PoolAttrs {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // [begin..., end...] as given (ignored unless autoPad is NOTSET)
  std::string autoPad = "NOTSET";
  bool ceilMode = false;
};

/// Reads and validates the pooling attributes for `spatialRank` spatial dims.
PoolAttrs readPoolAttrs(const Node& node, size_t spatialRank);

/// One spatial dim of a pooling window: output size and the pads actually applied.
struct PoolDim {
  int64_t in = 0;
  int64_t out = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t padBegin = 0;
  int64_t padEnd = 0;
};

/// Resolves dim i for a known input size; fails naming the node when the window does not fit.
PoolDim resolvePoolDim(const Node& node, const PoolAttrs& attrs, size_t i, int64_t inSize);

/// `x` [N, C, spatial...] with its spatial dims (those of `attrs`) replaced by the pooled ones
/// (unknown where the input's is); other trailing dims are kept (the blocked layouts' lanes).
SymShape pooledShape(const Node& node, const PoolAttrs& attrs, const SymShape& x);

/// Resolves every spatial dim of a concrete NC... input shape.
std::vector<PoolDim> resolvePoolDims(const Node& node, const PoolAttrs& attrs,
                                     const Shape& inputShape);

}  // namespace kiln::ir
