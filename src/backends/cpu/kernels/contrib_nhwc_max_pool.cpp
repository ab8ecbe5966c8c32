// CPU kernel of com.microsoft NhwcMaxPool (ir/ops/contrib_nhwc_max_pool.cpp): x moved to
// channels-first, the ONNX MaxPool kernel (8-bit since opset 12), the result moved back.
#include <algorithm>
#include <memory>

#include "backends/cpu/kernels/channels_last.h"
#include "backends/cpu/kernels/onnx_stage.h"

namespace kiln::cpu {
namespace {

KernelFn makeNhwcMaxPoolKernel(const KernelCreateInfo& info) {
  const ir::TypeInfo* x = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  if (!x || !x->shape || x->shape->size() < 3)
    ir::failNode(info.node, "x needs a known rank of 3 or more");
  ir::TypeInfo nchw = *x;
  std::rotate(nchw.shape->begin() + 1, nchw.shape->end() - 1, nchw.shape->end());
  auto pool = std::make_shared<OnnxStage>(info, "MaxPool", 12, std::vector{nchw});
  return [pool](KernelContext& ctx) {
    const Tensor& in = ctx.input(0);
    const Tensor first = toChannelsFirst(in);
    const Tensor pooled =
        pool->run(ctx, {&first}, in.dtype(), channelsFirstShape(ctx.output(0).shape()));
    ctx.setOutput(0, toChannelsLast(pooled));
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "NhwcMaxPool",
                                KernelFactory(makeNhwcMaxPoolKernel));

}  // namespace kiln::cpu
