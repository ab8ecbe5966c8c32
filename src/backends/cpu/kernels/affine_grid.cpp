// CPU kernel of AffineGrid: grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1), where the base
// coordinates span [-1, 1] over pixel centers (align_corners) or pixel edges (default).
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

/// Normalized coordinate of index i on an axis of `size` points.
double baseCoordinate(int64_t i, int64_t size, bool alignCorners) {
  if (alignCorners)
    return size > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1) : -1.0;
  return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size);
}

void affineGridKernel(KernelContext& ctx, bool alignCorners) {
  const Tensor& theta = ctx.input(0);
  const std::vector<int64_t> size = ctx.input(1).toInt64Vector();
  if (size.size() != 4 && size.size() != 5)
    ctx.fail("size must hold 4 or 5 values, got " + std::to_string(size.size()),
             ErrorCode::kInvalidArgument);
  const auto r = static_cast<int64_t>(size.size()) - 2;
  if (theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != r || theta.dim(2) != r + 1) {
    ctx.fail("theta " + theta.describe() + " must be (" + std::to_string(size[0]) + ", " +
                 std::to_string(r) + ", " + std::to_string(r + 1) + ")",
             ErrorCode::kInvalidArgument);
  }
  for (int64_t i = 2; i < static_cast<int64_t>(size.size()); ++i) {
    if (size[i] < 0) ctx.fail("size has a negative dim", ErrorCode::kInvalidArgument);
  }
  Shape outShape{size[0]};
  outShape.insert(outShape.end(), size.begin() + 2, size.end());
  outShape.push_back(r);
  Tensor& grid = ctx.allocateOutput(0, theta.dtype(), outShape);
  // Spatial extents padded to 3-D (D = 1 for 2-D grids); base holds (x, y, z) per point.
  const int64_t depth = r == 3 ? size[2] : 1, height = size[r == 3 ? 3 : 2], width = size.back();
  dispatchFloat(theta.dtype(), "AffineGrid", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* th = theta.data<T>();
    T* out = grid.data<T>();
    for (int64_t n = 0; n < size[0]; ++n) {
      const T* m = th + n * r * (r + 1);
      for (int64_t d = 0; d < depth; ++d) {
        for (int64_t h = 0; h < height; ++h) {
          for (int64_t w = 0; w < width; ++w) {
            const double base[4] = {baseCoordinate(w, width, alignCorners),
                                    baseCoordinate(h, height, alignCorners),
                                    r == 3 ? baseCoordinate(d, depth, alignCorners) : 1.0, 1.0};
            for (int64_t row = 0; row < r; ++row) {
              double v = 0;
              for (int64_t k = 0; k <= r; ++k)
                v += static_cast<double>(static_cast<ComputeType<T>>(m[row * (r + 1) + k])) *
                     base[k];
              *out++ = static_cast<T>(static_cast<ComputeType<T>>(v));
            }
          }
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL(
    "AffineGrid",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "align_corners", 0) != 0; },
               affineGridKernel));

}  // namespace
}  // namespace kiln::cpu
