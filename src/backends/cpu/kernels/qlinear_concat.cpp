// CPU kernel of QLinearConcat (com.microsoft, and kiln's, which opt/fuse_qdq_elementwise.cpp makes
// of DQ -> Concat -> Q): each input's requantization to Y's scale and zero point is a table of the
// 256 values it can take (Y's value for each, what DequantizeLinear then QuantizeLinear give), so
// the concatenation copies through the table: a byte lookup per element (AVX512-VBMI, 64 bytes a
// step), or a plain copy where an input already has Y's parameters.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/qlinear_lookup.h"
#include "backends/cpu/kernels/qlinear_quantization.h"
#include "backends/cpu/thread_pool.h"
#include "ir/node_attrs.h"

namespace kiln::cpu {
namespace {

// One input: its bytes, its row length along the axis (the dims from it on), its table indexed
// by the input's bits, and whether that table is the identity.
struct ConcatPart {
  const uint8_t* bytes = nullptr;
  int64_t row = 0;
  std::array<uint8_t, 256> table{};
  bool identity = true;
};

template <typename X, typename Q>
void fillTable(const Quantization& from, const Quantization& to, ConcatPart& part) {
  for (int bits = 0; bits < 256; ++bits) {
    const X v = static_cast<X>(static_cast<uint8_t>(bits));
    const Q q = to.template quantize<Q>(from.dequantize(v));
    part.table[static_cast<size_t>(bits)] = static_cast<uint8_t>(q);
    part.identity = part.identity && static_cast<uint8_t>(q) == bits;
  }
}

void qlinearConcat(KernelContext& ctx, int64_t axisAttr) {
  Tensor& y = ctx.output(0);
  const int64_t rank = static_cast<int64_t>(y.rank());
  const int64_t axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
  if (axis < 0 || axis >= rank)
    ctx.fail(
        "axis " + std::to_string(axisAttr) + " is out of range for rank " + std::to_string(rank),
        ErrorCode::kInvalidArgument);
  const Quantization qy = quantizationAt(ctx, 0, "Y_scale", "Y_zero_point");
  const bool ySigned = y.dtype() == DataType::kInt8;
  std::vector<ConcatPart> parts;
  for (size_t i = 2; i < ctx.numInputs(); i += 3) {
    const Tensor& x = ctx.input(i);
    if (x.dtype() != DataType::kInt8 && x.dtype() != DataType::kUint8)
      ctx.fail("input " + std::to_string(i) + " must be int8 or uint8, got " + x.describe());
    ConcatPart part;
    part.bytes = static_cast<const uint8_t*>(x.raw());
    part.row = axis < static_cast<int64_t>(x.rank())
                   ? shapeNumel(Shape(x.shape().begin() + axis, x.shape().end()))
                   : 0;
    const Quantization qx = quantizationAt(ctx, i + 1, "scale", "zero_point");
    const bool xSigned = x.dtype() == DataType::kInt8;
    if (xSigned && ySigned) fillTable<int8_t, int8_t>(qx, qy, part);
    if (xSigned && !ySigned) fillTable<int8_t, uint8_t>(qx, qy, part);
    if (!xSigned && ySigned) fillTable<uint8_t, int8_t>(qx, qy, part);
    if (!xSigned && !ySigned) fillTable<uint8_t, uint8_t>(qx, qy, part);
    parts.push_back(part);
  }
  const int64_t outRow =
      axis < rank ? shapeNumel(Shape(y.shape().begin() + axis, y.shape().end())) : 0;
  const int64_t outer = outRow == 0 ? 0 : y.numel() / outRow;
  uint8_t* out = static_cast<uint8_t*>(y.raw());
  const bool vbmi = cpuSupportsAvx512Vbmi();
  parallelForAtLeast(outer,
                     std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, outRow)),
                     [&](int64_t o0, int64_t o1) {
                       for (int64_t o = o0; o < o1; ++o) {
                         uint8_t* dst = out + o * outRow;
                         for (const ConcatPart& p : parts) {
                           const uint8_t* src = p.bytes + o * p.row;
                           if (p.identity) {
                             std::memcpy(dst, src, static_cast<size_t>(p.row));
                           } else if (vbmi) {
                             lookupBytesAvx512Vbmi(p.table.data(), src, p.row, dst);
                           } else {
                             for (int64_t k = 0; k < p.row; ++k) dst[k] = p.table[src[k]];
                           }
                           dst += p.row;
                         }
                       }
                     });
}

KernelFn qlinearConcatKernel(const KernelCreateInfo& info) {
  const int64_t axis = ir::attrInt(info.node, "axis");
  return [axis](KernelContext& ctx) { qlinearConcat(ctx, axis); };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("kiln", "QLinearConcat", KernelFactory(qlinearConcatKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "QLinearConcat",
                                KernelFactory(qlinearConcatKernel));

}  // namespace kiln::cpu
