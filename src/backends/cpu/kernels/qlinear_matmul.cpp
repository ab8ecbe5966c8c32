// CPU kernel of QLinearMatMul: MatMulInteger's int32 product, requantized with the multiplier
// a_scale * b_scale / y_scale (computed in the scales' type, as the ONNX reference does; the
// product in float32, requantizeInFloat). The conformance reference of the integer-GEMM
// candidates (qlinear_matmul_qgemm.cpp).
#include "backends/cpu/kernels/qlinear_integer.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {
namespace {

// a_scale may hold one value per row of A and b_scale one per column of B; y's are per tensor.
struct MatMulScales {
  std::vector<double> a, b, y, yZeroPoint;
};

template <typename C, typename Q>
void requantizeProduct(const Tensor& product, const MatMulScales& s, int64_t M, int64_t N, Q* out) {
  const int32_t* acc = product.data<int32_t>();
  const int64_t n = product.numel();
  const double y = roundTo<C>(s.y[0]);
  for (int64_t k = 0; k < n; ++k) {
    const size_t row = s.a.size() == 1 ? 0 : static_cast<size_t>((k / N) % M);
    const size_t col = s.b.size() == 1 ? 0 : static_cast<size_t>(k % N);
    const double multiplier =
        roundTo<C>(roundTo<C>(roundTo<C>(s.a[row]) * roundTo<C>(s.b[col])) / y);
    out[k] = roundAndSaturate<Q>(requantizeInFloat(acc[k], multiplier), s.yZeroPoint[0]);
  }
}

KernelFn makeQLinearMatMulKernel(const KernelCreateInfo& info) {
  // MatMulInteger takes A, B, a_zero_point, b_zero_point.
  IntegerStage integer(info, "MatMulInteger", {0, 3, 2, 5});
  return [integer](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const int64_t M = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1;
    const int64_t N = b.rank() >= 2 ? b.dim(b.rank() - 1) : 1;
    MatMulScales s;
    s.a = qlinearParams(ctx, 1, "a_scale", M);
    s.b = qlinearParams(ctx, 4, "b_scale", N);
    s.y = qlinearParams(ctx, 6, "y_scale", 1);
    s.yZeroPoint = qlinearParams(ctx, 7, "y_zero_point", 1);
    Tensor& y = ctx.output(0);
    const Tensor product = integer.run(ctx, y.shape());
    dispatchFloat(ctx.input(1).dtype(), "QLinearMatMul scale", [&](auto ctag) {
      dispatchQuantized(y.dtype(), "QLinearMatMul output", [&](auto qtag) {
        using Q = typename decltype(qtag)::type;
        requantizeProduct<typename decltype(ctag)::type>(product, s, M, N, y.data<Q>());
      });
    });
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("QLinearMatMul", KernelFactory(makeQLinearMatMulKernel));

}  // namespace kiln::cpu
