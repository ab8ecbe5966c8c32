// CPU kernel of kiln::QLinearLookup (ir/ops/quantized_elementwise.cpp): one table lookup per
// byte, 64 at a time with AVX512-VBMI, else one by one; large tensors split over the pool.
#include "backends/cpu/kernels/qlinear_lookup.h"

#include <array>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

void qlinearLookup(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& table = ctx.input(1);
  if (table.numel() != 256)
    ctx.fail("table must hold 256 values, got " + table.describe(), ErrorCode::kInvalidArgument);
  // Indexed by x's bits: an int8 x's entry for bits b is at b ^ 0x80 in the table's order.
  const uint8_t flip = x.dtype() == DataType::kInt8 ? 0x80 : 0;
  std::array<uint8_t, 256> byBits;
  const uint8_t* entries = static_cast<const uint8_t*>(table.raw());
  for (int b = 0; b < 256; ++b) byBits[static_cast<size_t>(b)] = entries[b ^ flip];
  const uint8_t* in = static_cast<const uint8_t*>(x.raw());
  uint8_t* out = static_cast<uint8_t*>(ctx.output(0).raw());
  const bool vbmi = cpuSupportsAvx512Vbmi();
  parallelForAtLeast(x.numel(), 4 * kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    if (vbmi) return lookupBytesAvx512Vbmi(byBits.data(), in + begin, end - begin, out + begin);
    for (int64_t i = begin; i < end; ++i) out[i] = byBits[in[i]];
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "QLinearLookup", qlinearLookup);

}  // namespace kiln::cpu
