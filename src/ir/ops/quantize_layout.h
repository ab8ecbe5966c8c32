// How QuantizeLinear and DequantizeLinear map scale and zero-point values onto the elements of x:
// one value for the whole tensor, one per index along `axis` (opset 13+), or one per block of
// `block_size` indices along `axis` (opset 21+; the scale then has x's shape with that dim divided
// by block_size, rounded up). Shared by shape inference and the CPU kernels so both check alike.
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace kiln::ir {

struct QuantLayout {
  int64_t outer = 1;      // product of x's dims before axis
  int64_t axisDim = 1;    // x's dim at axis
  int64_t inner = 1;      // product of x's dims after axis
  int64_t blockSize = 0;  // > 0: blocked quantization
  bool perTensor = true;

  /// The scale / zero-point index of x's element (o, a, i), x viewed as [outer, axisDim, inner].
  int64_t paramIndex(int64_t o, int64_t a, int64_t i) const {
    if (perTensor) return 0;
    if (blockSize == 0) return a;
    const int64_t blocks = (axisDim + blockSize - 1) / blockSize;
    return (o * blocks + a / blockSize) * inner + i;
  }
};

/// Checks the shapes of the scale (input 1) and the zero point (input 2; null when absent) against
/// x for the node's `axis` and `block_size`; fails naming the node and the input on a mismatch.
QuantLayout quantLayout(const Node& node, const Shape& x, const Shape& scale,
                        const Shape* zeroPoint);

}  // namespace kiln::ir
