// CPU kernels of com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul (ir/ops/
// contrib_quantized_matmul.cpp): MatMulInteger's int32 product (its integer-GEMM candidates when B
// is a constant, qlinear_matmul_qgemm.cpp), then y = float(v) * (a_scale * b_scale[n]) + bias[n]
// in float32, as ONNX Runtime's output stage computes it. DynamicQuantizeMatMul first quantizes A
// to uint8 as DynamicQuantizeLinear does. MatMulInteger16 runs the int32 MatMul kernel on its
// int16 operands widened to int32 (the sums wrap around in int32 as onnxruntime's do).
#include <memory>

#include "backends/cpu/kernels/contrib_quantized_matmul.h"
#include "backends/cpu/kernels/onnx_stage.h"
#include "backends/cpu/kernels/quantize_dynamic.h"
#include "backends/cpu/kernels/quantize_math.h"

namespace kiln::cpu {

void scaleIntegerProduct(const KernelContext& ctx, const FloatProductInputs& in,
                         const Tensor& product, float aScale, Tensor& y) {
  const int64_t N = y.rank() >= 1 ? y.dim(y.rank() - 1) : 1;
  const std::vector<double> bScale = qlinearParams(ctx, in.bScale, "b_scale", N);
  std::vector<float> multiplier(bScale.size());
  for (size_t n = 0; n < bScale.size(); ++n) multiplier[n] = aScale * static_cast<float>(bScale[n]);
  const float* bias = nullptr;
  if (ctx.hasInput(in.bias)) {
    const Tensor& b = ctx.input(in.bias);
    if (b.rank() != 1 || b.dim(0) != N) {
      ctx.fail("bias must be 1-D with " + std::to_string(N) +
                   " values (one per output column), got " + b.describe(),
               ErrorCode::kInvalidArgument);
    }
    bias = b.data<float>();
  }
  const int32_t* acc = product.data<int32_t>();
  float* out = y.data<float>();
  const int64_t count = y.numel();
  for (int64_t k = 0; k < count; ++k) {
    const int64_t n = N == 0 ? 0 : k % N;
    const float v = static_cast<float>(acc[k]) *
                    multiplier[multiplier.size() == 1 ? 0 : static_cast<size_t>(n)];
    out[k] = bias ? v + bias[n] : v;
  }
}

namespace {

constexpr size_t kOmitted = 1000;  // a pick past the node's inputs

KernelFn makeMatMulIntegerToFloatKernel(const KernelCreateInfo& info) {
  // MatMulInteger takes A, B, a_zero_point, b_zero_point.
  IntegerStage integer(info, "MatMulInteger", {0, 1, 4, 5});
  return [integer](KernelContext& ctx) {
    const float aScale = static_cast<float>(qlinearParams(ctx, 2, "a_scale", 1)[0]);
    Tensor& y = ctx.output(0);
    scaleIntegerProduct(ctx, {3, 6}, integer.run(ctx, y.shape()), aScale, y);
  };
}

KernelFn makeDynamicQuantizeMatMulKernel(const KernelCreateInfo& info) {
  const ir::TypeInfo* a = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!a) ir::failNode(info.node, "input A has no type");
  // A and a_zero_point are quantized at run time: MatMulInteger sees uint8 ones.
  auto quantizedA = std::make_shared<ir::TypeInfo>(ir::TypeInfo{DataType::kUint8, a->shape});
  auto zeroPoint = std::make_shared<ir::TypeInfo>(ir::TypeInfo{DataType::kUint8, ir::SymShape{}});
  IntegerStage integer(info, "MatMulInteger", {0, 1, kOmitted, 3},
                       {quantizedA.get(), nullptr, zeroPoint.get()});
  return [integer](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const DynamicUint8 q = chooseDynamicUint8(a.data<float>(), a.numel());
    Tensor aq(DataType::kUint8, a.shape());
    quantizeDynamicUint8(a.data<float>(), a.numel(), q, aq.data<uint8_t>());
    Tensor zp(DataType::kUint8, Shape{});
    zp.data<uint8_t>()[0] = q.zeroPoint;
    Tensor& y = ctx.output(0);
    scaleIntegerProduct(ctx, {2, 4}, integer.run(ctx, y.shape(), {&aq, nullptr, &zp}), q.scale, y);
  };
}

Tensor widenedToInt32(const Tensor& x) {
  Tensor y(DataType::kInt32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) y.data<int32_t>()[i] = x.data<int16_t>()[i];
  return y;
}

KernelFn makeMatMulInteger16Kernel(const KernelCreateInfo& info) {
  std::vector<ir::TypeInfo> types;
  for (size_t i = 0; i < 2; ++i) {
    types.push_back(info.inputTypes[i] ? *info.inputTypes[i] : ir::TypeInfo{});
    types.back().dtype = DataType::kInt32;
  }
  auto matmul = std::make_shared<OnnxStage>(info, "MatMul", 13, std::move(types));
  return [matmul](KernelContext& ctx) {
    const Tensor a = widenedToInt32(ctx.input(0)), b = widenedToInt32(ctx.input(1));
    ctx.setOutput(0, matmul->run(ctx, {&a, &b}, DataType::kInt32));
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulInteger16",
                                KernelFactory(makeMatMulInteger16Kernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "MatMulIntegerToFloat",
                                KernelFactory(makeMatMulIntegerToFloatKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "DynamicQuantizeMatMul",
                                KernelFactory(makeDynamicQuantizeMatMulKernel));

}  // namespace kiln::cpu
