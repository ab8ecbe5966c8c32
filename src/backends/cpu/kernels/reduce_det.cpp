// CPU kernel of Det: the determinant of each trailing M x M matrix, by LU decomposition with
// partial pivoting in double precision.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {
namespace {

double determinant(std::vector<double>& a, int64_t m) {
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
    }
    if (a[pivot * m + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[pivot * m + c], a[col * m + c]);
      det = -det;
    }
    const double diag = a[col * m + col];
    det *= diag;
    for (int64_t r = col + 1; r < m; ++r) {
      const double factor = a[r * m + col] / diag;
      for (int64_t c = col + 1; c < m; ++c) a[r * m + c] -= factor * a[col * m + c];
    }
  }
  return det;
}

void detKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("needs an input of rank >= 2");
  const int64_t m = x.dim(x.rank() - 1);
  if (x.dim(x.rank() - 2) != m) ctx.fail("needs square matrices, got " + shapeToString(x.shape()));
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "Det", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    std::vector<double> matrix(static_cast<size_t>(m * m));
    for (int64_t b = 0; b < y.numel(); ++b) {
      const T* src = px + b * m * m;
      for (int64_t i = 0; i < m * m; ++i) matrix[i] = static_cast<double>(src[i]);
      py[b] = static_cast<T>(determinant(matrix, m));
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Det", detKernel);

}  // namespace
}  // namespace kiln::cpu
