// CPU kernel of NonMaxSuppression: per batch and class, greedily keeps the highest-scoring box
// (lower index first on equal scores) unless its IoU with a kept box exceeds iou_threshold.
#include <algorithm>
#include <array>
#include <numeric>

#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

/// A box as [min, max) extents on each axis, whatever corner order or format it came in.
struct Extent {
  float yMin, xMin, yMax, xMax;
  float area() const { return (yMax - yMin) * (xMax - xMin); }
};

Extent boxExtent(const float* b, bool centerPoint) {
  if (centerPoint) {  // [x_center, y_center, width, height]
    const float hw = b[2] / 2, hh = b[3] / 2;
    return Extent{b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  // [y1, x1, y2, x2] with either diagonal.
  return Extent{std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]),
                std::max(b[1], b[3])};
}

/// True when IoU(a, b) > threshold; boxes without overlap or with no area never suppress.
bool suppresses(const Extent& a, const Extent& b, float threshold) {
  const float ix0 = std::max(a.xMin, b.xMin), ix1 = std::min(a.xMax, b.xMax);
  if (ix1 <= ix0) return false;
  const float iy0 = std::max(a.yMin, b.yMin), iy1 = std::min(a.yMax, b.yMax);
  if (iy1 <= iy0) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float areaA = a.area(), areaB = b.area();
  const float uni = areaA + areaB - inter;
  if (inter <= 0 || areaA <= 0 || areaB <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

/// An optional scalar input (empty name or empty tensor means absent).
const Tensor* scalarInput(KernelContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return nullptr;
  const Tensor& t = ctx.input(i);
  if (t.numel() == 0) return nullptr;
  if (t.numel() != 1)
    ctx.fail("input " + std::to_string(i) + " must hold one value, got " + t.describe(),
             ErrorCode::kInvalidArgument);
  return &t;
}

void nonMaxSuppressionKernel(KernelContext& ctx, bool centerPoint) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    ctx.fail("boxes must be [batches, boxes, 4], got " + boxes.describe(),
             ErrorCode::kInvalidArgument);
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    ctx.fail("scores " + scores.describe() + " do not match boxes " + boxes.describe(),
             ErrorCode::kInvalidArgument);
  }
  const Tensor* maxOut = scalarInput(ctx, 2);
  const Tensor* iouIn = scalarInput(ctx, 3);
  const Tensor* scoreIn = scalarInput(ctx, 4);
  const int64_t maxPerClass = maxOut ? std::max<int64_t>(0, maxOut->intAt(0)) : 0;
  const float iouThreshold = iouIn ? static_cast<float>(iouIn->doubleAt(0)) : 0.0f;
  if (iouThreshold < 0 || iouThreshold > 1)
    ctx.fail("iou_threshold must be in [0, 1], got " + std::to_string(iouThreshold),
             ErrorCode::kInvalidArgument);
  const int64_t batches = boxes.dim(0), numBoxes = boxes.dim(1), classes = scores.dim(1);

  std::vector<std::array<int64_t, 3>> selected;
  std::vector<int64_t> order;
  std::vector<Extent> kept;
  for (int64_t b = 0; b < batches && maxPerClass > 0; ++b) {
    const float* batchBoxes = boxes.data<float>() + b * numBoxes * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores.data<float>() + (b * classes + c) * numBoxes;
      order.clear();
      for (int64_t i = 0; i < numBoxes; ++i) {
        if (!scoreIn || s[i] > static_cast<float>(scoreIn->doubleAt(0))) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [s](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= maxPerClass) break;
        const Extent e = boxExtent(batchBoxes + i * 4, centerPoint);
        const bool drop = std::any_of(kept.begin(), kept.end(), [&](const Extent& k) {
          return suppresses(e, k, iouThreshold);
        });
        if (drop) continue;
        kept.push_back(e);
        selected.push_back({b, c, i});
      }
    }
  }
  Tensor& out = ctx.allocateOutput(0, DataType::kInt64, {static_cast<int64_t>(selected.size()), 3});
  int64_t* p = out.data<int64_t>();
  for (const auto& s : selected) p = std::copy(s.begin(), s.end(), p);
}

KILN_REGISTER_CPU_KERNEL(
    "NonMaxSuppression",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "center_point_box", 0) == 1; },
               nonMaxSuppressionKernel));

}  // namespace
}  // namespace kiln::cpu
