// CPU kernel of QLinearConv: ConvInteger's int32 convolution plus the int32 bias, requantized with
// the multiplier x_scale * w_scale / y_scale (float arithmetic; w_scale per tensor or per output
// channel) as ONNX Runtime does it (requantizeInFloat). The conformance reference of the
// integer-GEMM candidates (qlinear_conv_qgemm.cpp), which compute the same bit for bit.
#include "backends/cpu/kernels/qlinear_integer.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {
namespace {

KernelFn makeQLinearConvKernel(const KernelCreateInfo& info) {
  // ConvInteger takes X, W, x_zero_point, w_zero_point.
  IntegerStage integer(info, "ConvInteger", {0, 3, 2, 5});
  return [integer](KernelContext& ctx) {
    const Tensor& w = ctx.input(3);
    const int64_t channels = w.rank() > 0 ? w.dim(0) : 1;
    const std::vector<double> xScale = qlinearParams(ctx, 1, "x_scale", 1);
    const std::vector<double> wScale = qlinearParams(ctx, 4, "w_scale", channels);
    const std::vector<double> yScale = qlinearParams(ctx, 6, "y_scale", 1);
    const std::vector<double> yZeroPoint = qlinearParams(ctx, 7, "y_zero_point", 1);
    const Tensor* bias = ctx.hasInput(8) ? &ctx.input(8) : nullptr;
    if (bias && (bias->rank() != 1 || bias->numel() != channels)) {
      ctx.fail("B (input 8) must hold one value per output channel (" + std::to_string(channels) +
                   "), got " + bias->describe(),
               ErrorCode::kInvalidArgument);
    }
    Tensor& y = ctx.output(0);
    const Tensor sums = integer.run(ctx, y.shape());
    std::vector<double> multipliers(wScale.size());
    for (size_t m = 0; m < wScale.size(); ++m) {
      multipliers[m] =
          roundTo<float>(roundTo<float>(roundTo<float>(xScale[0]) * roundTo<float>(wScale[m])) /
                         roundTo<float>(yScale[0]));
    }
    const int64_t spatial =
        y.rank() > 2 ? shapeNumel(Shape(y.shape().begin() + 2, y.shape().end())) : 1;
    const int32_t* acc = sums.data<int32_t>();
    const int32_t* b = bias ? bias->data<int32_t>() : nullptr;
    dispatchQuantized(y.dtype(), "QLinearConv output", [&](auto qtag) {
      using Q = typename decltype(qtag)::type;
      Q* out = y.data<Q>();
      for (int64_t k = 0; k < y.numel(); ++k) {
        const int64_t channel = (k / spatial) % channels;
        const int32_t sum = wrappingAdd(acc[k], b ? b[channel] : 0);
        out[k] = roundAndSaturate<Q>(
            requantizeInFloat(
                sum, multipliers[multipliers.size() == 1 ? 0 : static_cast<size_t>(channel)]),
            yZeroPoint[0]);
      }
    });
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("QLinearConv", KernelFactory(makeQLinearConvKernel));

}  // namespace kiln::cpu
