#include "backends/cpu/broadcast.h"

namespace kiln::cpu {

std::vector<int64_t> broadcastStrides(const Shape& shape, const Shape& outShape) {
  const size_t rank = outShape.size();
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    size_t o = i + rank - shape.size();
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

}  // namespace kiln::cpu
