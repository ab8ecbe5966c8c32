// CPU kernel of com.microsoft NhwcMaxPool (ir/ops/contrib_nhwc_max_pool.cpp): x moved to
// channels-first, the ONNX MaxPool kernel (8-bit since opset 12), the result moved back.
#include <algorithm>
#include <memory>

#include "backends/cpu/kernels/onnx_stage.h"

namespace kiln::cpu {
namespace {

// An 8-bit [N, A, B] tensor as [N, B, A] (channels last <-> first, with A or B the flattened
// spatial dims).
Tensor swapInnerAxes(const Tensor& x, const Shape& shape, int64_t a, int64_t b) {
  Tensor y(x.dtype(), shape);
  const uint8_t* src = x.data<uint8_t>();
  uint8_t* dst = y.data<uint8_t>();
  const int64_t n = a * b == 0 ? 0 : x.numel() / (a * b);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < a; ++p)
      for (int64_t q = 0; q < b; ++q) dst[(i * b + q) * a + p] = src[(i * a + p) * b + q];
  return y;
}

Shape channelsFirst(const Shape& s) {
  Shape out{s[0], s.back()};
  out.insert(out.end(), s.begin() + 1, s.end() - 1);
  return out;
}

KernelFn makeNhwcMaxPoolKernel(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!x || !x->shape || x->shape->size() < 3)
    ir::failNode(info.node, "x needs a known rank of 3 or more");
  ir::TypeInfo nchw = *x;
  std::rotate(nchw.shape->begin() + 1, nchw.shape->end() - 1, nchw.shape->end());
  auto pool = std::make_shared<OnnxStage>(info, "MaxPool", 12, std::vector{nchw});
  return [pool](KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const Shape& s = in.shape();
    const int64_t channels = s.back(), spatial = channels == 0 ? 0 : in.numel() / (s[0] * channels);
    const Tensor first = swapInnerAxes(in, channelsFirst(s), spatial, channels);
    Tensor& y = ctx.output(0);
    const Shape& ys = y.shape();
    const Tensor pooled = pool->run(ctx, {&first}, in.dtype(), channelsFirst(ys));
    const int64_t outSpatial = channels == 0 ? 0 : y.numel() / (ys[0] * channels);
    ctx.setOutput(0, swapInnerAxes(pooled, ys, channels, outSpatial));
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "NhwcMaxPool",
                                KernelFactory(makeNhwcMaxPoolKernel));

}  // namespace kiln::cpu
