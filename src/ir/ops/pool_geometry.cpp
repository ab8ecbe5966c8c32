#include "ir/ops/pool_geometry.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "ir/node_attrs.h"

namespace kiln::ir {
namespace {

std::vector<int64_t> readPositive(const Node& node, const char* name, size_t count) {
  if (!hasAttr(node, name)) return std::vector<int64_t>(count, 1);
  std::vector<int64_t> v = attrInts(node, name);
  if (v.size() != count) {
    failNode(node, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                       " values, expected " + std::to_string(count));
  }
  for (int64_t x : v) {
    if (x < 1) failNode(node, std::string("attribute '") + name + "' values must be positive");
  }
  return v;
}

}  // namespace

PoolAttrs readPoolAttrs(const Node& node, size_t spatialRank) {
  PoolAttrs a;
  a.kernel = attrInts(node, "kernel_shape");
  if (a.kernel.size() != spatialRank) {
    failNode(node, "kernel_shape has " + std::to_string(a.kernel.size()) + " values for " +
                       std::to_string(spatialRank) + " spatial dims");
  }
  for (int64_t k : a.kernel) {
    if (k < 1) failNode(node, "kernel_shape values must be positive");
  }
  a.strides = readPositive(node, "strides", spatialRank);
  a.dilations = readPositive(node, "dilations", spatialRank);
  a.pads = attrInts(node, "pads", std::vector<int64_t>(2 * spatialRank, 0));
  if (a.pads.size() != 2 * spatialRank) {
    failNode(node, "pads has " + std::to_string(a.pads.size()) + " values, expected " +
                       std::to_string(2 * spatialRank));
  }
  for (int64_t p : a.pads) {
    if (p < 0) failNode(node, "pads must not be negative");
  }
  a.autoPad = attrString(node, "auto_pad", "NOTSET");
  if (a.autoPad != "NOTSET" && a.autoPad != "SAME_UPPER" && a.autoPad != "SAME_LOWER" &&
      a.autoPad != "VALID") {
    failNode(node, "unknown auto_pad '" + a.autoPad + "'");
  }
  a.ceilMode = attrInt(node, "ceil_mode", 0) != 0;
  return a;
}

PoolDim resolvePoolDim(const Node& node, const PoolAttrs& attrs, size_t i, int64_t inSize) {
  // In 128 bits: the kernel, dilation, stride and pads of a bad model may each be near INT64_MAX,
  // and their sums and products must not wrap.
  using Wide = __int128;
  const auto fitsInt64 = [](Wide v) { return v >= INT64_MIN && v <= INT64_MAX; };
  PoolDim d;
  d.in = inSize;
  d.kernel = attrs.kernel[i];
  d.stride = attrs.strides[i];
  d.dilation = attrs.dilations[i];
  const Wide window = Wide{d.kernel - 1} * d.dilation + 1;
  const std::string geometry = "kernel_shape " + std::to_string(d.kernel) + ", dilation " +
                               std::to_string(d.dilation) + ", stride " + std::to_string(d.stride) +
                               " on input size " + std::to_string(inSize);
  if (attrs.autoPad == "SAME_UPPER" || attrs.autoPad == "SAME_LOWER") {
    const Wide out = (Wide{inSize} + d.stride - 1) / d.stride;
    const Wide total = std::max<Wide>(0, (out - 1) * d.stride + window - inSize);
    if (!fitsInt64(total))
      failNode(node, "pooling window too large: " + geometry + " needs pads past int64",
               ErrorCode::kInvalidArgument);
    d.out = static_cast<int64_t>(out);
    const auto pads = static_cast<int64_t>(total);
    d.padBegin = attrs.autoPad == "SAME_UPPER" ? pads / 2 : pads - pads / 2;
    d.padEnd = pads - d.padBegin;
    return d;
  }
  if (attrs.autoPad == "NOTSET") {
    d.padBegin = attrs.pads[i];
    d.padEnd = attrs.pads[i + attrs.kernel.size()];
  }
  const Wide span = Wide{inSize} + d.padBegin + d.padEnd - window;
  if (span < 0) {
    const std::string windowText =
        fitsInt64(window) ? std::to_string(static_cast<int64_t>(window)) : "more than 2^63";
    failNode(node,
             "pooling window of " + windowText + " does not fit input size " +
                 std::to_string(inSize) + " with pads " + std::to_string(d.padBegin) + "+" +
                 std::to_string(d.padEnd),
             ErrorCode::kInvalidArgument);
  }
  Wide out = span / d.stride + 1;
  if (attrs.ceilMode) {
    out = (span + d.stride - 1) / d.stride + 1;
    // The last window must start inside the input or its begin padding (ONNX reference rule).
    if ((out - 1) * d.stride >= Wide{inSize} + d.padBegin) --out;
  }
  if (!fitsInt64(out)) {
    failNode(node,
             "pooling output size past int64: " + geometry + ", pads " +
                 std::to_string(d.padBegin) + "+" + std::to_string(d.padEnd),
             ErrorCode::kInvalidArgument);
  }
  d.out = static_cast<int64_t>(out);
  return d;
}

std::vector<PoolDim> resolvePoolDims(const Node& node, const PoolAttrs& attrs,
                                     const Shape& inputShape) {
  std::vector<PoolDim> dims;
  for (size_t i = 0; i < attrs.kernel.size(); ++i)
    dims.push_back(resolvePoolDim(node, attrs, i, inputShape[i + 2]));
  return dims;
}

SymShape pooledShape(const Node& node, const PoolAttrs& attrs, const SymShape& x) {
  SymShape y = x;
  for (size_t i = 0; i < attrs.kernel.size(); ++i) {
    const Dim& in = x[2 + i];
    y[2 + i] =
        in.isKnown() ? Dim::known(resolvePoolDim(node, attrs, i, in.value).out) : Dim::unknown();
  }
  return y;
}

}  // namespace kiln::ir
