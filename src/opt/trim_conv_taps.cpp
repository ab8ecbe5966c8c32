// trimDeadConvTaps: a Conv whose outer kernel rows or columns only ever read padding gets a
// smaller kernel. With a static input, whether tap t of a spatial axis reads the input for some
// output position o (0 <= o * stride - pad_begin + t * dilation < in) is known at build time.
// DeepLabV3's ASPP branches are 3x3 convolutions dilated by 24 and 36 on a 14x14 map: only the
// centre tap ever lands inside, so they become 1x1 convolutions, which run as pointwise GEMMs
// instead of nine-tap direct convolutions that skip eight taps per pixel. Dropping taps that
// multiply zeros is exact; the pads shrink by the dropped taps' reach, so the output keeps its
// size.
#include <algorithm>
#include <optional>

#include "ir/node_attrs.h"
#include "ir/ops/conv_geometry.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

struct AxisTrim {
  int64_t first = 0, last = 0;  // the taps kept, [first, last]
  int64_t padBegin = 0, padEnd = 0;
};

// The taps of spatial axis `a` that read the input for at least one of its `out` output
// positions, and the pads that keep the output length; nullopt when none does or the pads would
// turn negative.
std::optional<AxisTrim> liveTaps(const ir::ConvGeometry& g, size_t a, int64_t in) {
  const int64_t kernel = g.kernel[a], out = g.output[a];
  if (out <= 0) return std::nullopt;
  auto reads = [&](int64_t tap) {
    return ir::tapReadsInput(tap, 0, out - 1, g.strides[a], g.dilations[a], g.padsBegin[a], in);
  };
  AxisTrim t{0, kernel - 1, g.padsBegin[a], g.padsEnd[a]};
  while (t.first < kernel && !reads(t.first)) ++t.first;
  if (t.first == kernel) return std::nullopt;
  while (!reads(t.last)) --t.last;
  t.padBegin -= t.first * g.dilations[a];
  t.padEnd -= (kernel - 1 - t.last) * g.dilations[a];
  if (t.padBegin < 0 || t.padEnd < 0) return std::nullopt;
  return t;
}

// W [M, C, k1, ..., kn] cut to the taps [first, last] of each spatial axis.
Tensor sliceTaps(const Tensor& w, const std::vector<AxisTrim>& trims) {
  Shape shape = w.shape();
  const size_t spatial = trims.size();
  for (size_t a = 0; a < spatial; ++a) shape[2 + a] = trims[a].last - trims[a].first + 1;
  Tensor cut(DataType::kFloat32, shape);
  const int64_t planes = shape[0] * shape[1];
  std::vector<int64_t> index(spatial, 0);
  const float* src = w.data<float>();
  float* dst = cut.data<float>();
  const int64_t kept = cut.numel() / planes;
  for (int64_t p = 0; p < planes; ++p) {
    std::fill(index.begin(), index.end(), 0);
    for (int64_t k = 0; k < kept; ++k) {
      int64_t offset = 0;  // of the tap in the original plane
      for (size_t a = 0; a < spatial; ++a)
        offset = offset * w.dim(static_cast<int>(2 + a)) + index[a] + trims[a].first;
      *dst++ = src[p * (w.numel() / planes) + offset];
      for (size_t a = spatial; a-- > 0;) {  // next tap, last axis fastest
        if (++index[a] < shape[2 + a]) break;
        index[a] = 0;
      }
    }
  }
  return cut;
}

}  // namespace

int trimDeadConvTaps(ir::Graph& graph) {
  int trimmed = 0;
  for (ir::Node& conv : graph.nodes) {
    if (!conv.domain.empty() || conv.opType != "Conv" || conv.inputs.size() < 2) continue;
    if (ir::attrString(conv, "auto_pad", "NOTSET") != "NOTSET") continue;
    const Tensor* w = constantValue(graph, conv.inputs[1]);
    if (!w || w->dtype() != DataType::kFloat32 || w->rank() < 3) continue;
    const auto& xShape = graph.value(conv.inputs[0]).type.shape;
    if (!xShape || xShape->size() != w->shape().size()) continue;
    const size_t spatial = w->shape().size() - 2;
    std::vector<int64_t> inputSpatial(spatial), weightSpatial(spatial);
    for (size_t a = 0; a < spatial; ++a) {
      inputSpatial[a] = (*xShape)[2 + a].value;  // -1 where unknown
      weightSpatial[a] = w->dim(static_cast<int>(2 + a));
    }
    const ir::ConvGeometry g = ir::convGeometry(conv, inputSpatial, weightSpatial);
    std::vector<AxisTrim> trims;
    bool smaller = false;
    for (size_t a = 0; a < spatial; ++a) {
      std::optional<AxisTrim> t;
      if (inputSpatial[a] >= 0) t = liveTaps(g, a, inputSpatial[a]);
      trims.push_back(t.value_or(AxisTrim{0, g.kernel[a] - 1, g.padsBegin[a], g.padsEnd[a]}));
      smaller = smaller || (t && t->last - t->first + 1 < g.kernel[a]);
    }
    if (!smaller) continue;
    std::vector<int64_t> newPads(2 * spatial), newDilations = g.dilations, kernelShape(spatial);
    for (size_t a = 0; a < spatial; ++a) {
      newPads[a] = trims[a].padBegin;
      newPads[spatial + a] = trims[a].padEnd;
      kernelShape[a] = trims[a].last - trims[a].first + 1;
      if (kernelShape[a] == 1) newDilations[a] = 1;  // one tap: its dilation means nothing
    }
    conv.inputs[1] = addConstant(graph, conv.name + "_live_taps_W", sliceTaps(*w, trims));
    conv.attrs["pads"] = newPads;
    conv.attrs["dilations"] = newDilations;
    if (ir::hasAttr(conv, "kernel_shape")) conv.attrs["kernel_shape"] = kernelShape;
    ++trimmed;
  }
  return trimmed;
}

}  // namespace kiln::opt
