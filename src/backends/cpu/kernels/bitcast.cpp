// CPU kernel of BitCast (opset 26): the same bytes read as another type of the same width.
#include <cstring>

#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

void bitCastKernel(KernelContext& ctx, DataType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DataType::kString || to == DataType::kString ||
      dataTypeSize(x.dtype()) != dataTypeSize(to)) {
    ctx.fail("BitCast needs non-string types of the same width: " + dataTypeName(x.dtype()) +
                 " to " + dataTypeName(to),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.allocateOutput(0, to, x.shape());
  if (x.byteSize() > 0) std::memcpy(y.raw(), x.raw(), x.byteSize());
  // bool must stay 0 or 1: any non-zero byte reads as true.
  if (to == DataType::kBool) {
    auto* p = static_cast<uint8_t*>(y.raw());
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] != 0;
  }
}

KILN_REGISTER_CPU_KERNEL(
    "BitCast",
    bindKernel([](const ir::Node& node) { return static_cast<DataType>(ir::attrInt(node, "to")); },
               bitCastKernel));

}  // namespace
}  // namespace kiln::cpu
