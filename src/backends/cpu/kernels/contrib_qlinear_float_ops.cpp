// CPU kernels of the com.microsoft QLinear ops that compute in float between a dequantization and
// a quantization, as ONNX Runtime defines them (ir/ops/quantized_elementwise.cpp):
// QLinearAveragePool and QLinearSoftmax run the AveragePool and Softmax kernels on the dequantized
// X; QLinearWhere requantizes its operands to the output's scale and zero point and then runs the
// Where kernel (QLinearConcat: qlinear_concat.cpp).
#include <memory>

#include "backends/cpu/kernels/onnx_stage.h"
#include "backends/cpu/kernels/qlinear_quantization.h"

namespace kiln::cpu {

Tensor dequantizeTensor(const Tensor& x, const Quantization& q, const char* what) {
  Tensor y(DataType::kFloat32, x.shape());
  withEightBit(x, what, [&](auto* px) {
    for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = q.dequantize(px[i]);
  });
  return y;
}

Tensor quantizeTensor(const Tensor& x, const Quantization& q, DataType dtype, const char* what) {
  Tensor y(dtype, x.shape());
  dispatchQuantized(dtype, what, [&](auto tag) {
    using Q = typename decltype(tag)::type;
    for (int64_t i = 0; i < x.numel(); ++i) y.data<Q>()[i] = q.quantize<Q>(x.data<float>()[i]);
  });
  return y;
}

namespace {

const ir::TypeInfo& typeOf(const KernelCreateInfo& info, size_t i) {
  if (i >= info.inputTypes.size() || !info.inputTypes[i])
    ir::failNode(info.node, "input " + std::to_string(i) + " has no type");
  return *info.inputTypes[i];
}

ir::TypeInfo withDtype(ir::TypeInfo t, DataType dtype) {
  t.dtype = dtype;
  return t;
}

// QLinearAveragePool / QLinearSoftmax: quantize(op(dequantize(X))).
KernelFn makeFloatStageKernel(const KernelCreateInfo& info, const char* opType, int64_t opset) {
  // QLinearSoftmax's axis defaults to -1 whatever its "opset" (Softmax's before 13: 1).
  const int64_t axis = ir::attrInt(info.node, "axis", -1);
  auto stage = std::make_shared<OnnxStage>(
      info, opType, opset, std::vector{withDtype(typeOf(info, 0), DataType::kFloat32)},
      [&](ir::Node& node) {
        if (std::string(opType) == "Softmax") node.attrs["axis"] = axis;
      });
  return [stage](KernelContext& ctx) {
    const Tensor x =
        dequantizeTensor(ctx.input(0), quantizationAt(ctx, 1, "X_scale", "X_zero_point"), "X");
    Tensor& y = ctx.output(0);
    const Tensor result = stage->run(ctx, {&x}, DataType::kFloat32);
    ctx.setOutput(0, quantizeTensor(result, quantizationAt(ctx, 3, "Y_scale", "Y_zero_point"),
                                    y.dtype(), "Y"));
  };
}

// x requantized from its quantization to `to`'s, in `dtype`.
Tensor requantize(const KernelContext& ctx, size_t input, const Quantization& to, DataType dtype) {
  const Tensor x = dequantizeTensor(ctx.input(input),
                                    quantizationAt(ctx, input + 1, "scale", "zero_point"), "input");
  return quantizeTensor(x, to, dtype, "output");
}

KernelFn makeQLinearWhereKernel(const KernelCreateInfo& info) {
  const DataType out = typeOf(info, 8).dtype;
  auto stage =
      std::make_shared<OnnxStage>(info, "Where", 16,
                                  std::vector{typeOf(info, 0), withDtype(typeOf(info, 1), out),
                                              withDtype(typeOf(info, 4), out)});
  return [stage, out](KernelContext& ctx) {
    const Quantization z = quantizationAt(ctx, 7, "z_scale", "z_zero_point");
    const Tensor x = requantize(ctx, 1, z, out), y = requantize(ctx, 4, z, out);
    ctx.setOutput(0, stage->run(ctx, {&ctx.input(0), &x, &y}, out));
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearAveragePool",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makeFloatStageKernel(info, "AveragePool", 19);
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearSoftmax",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makeFloatStageKernel(info, "Softmax",
                                                              ir::attrInt(info.node, "opset", 13));
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearWhere",
                                KernelFactory(makeQLinearWhereKernel));

}  // namespace kiln::cpu
