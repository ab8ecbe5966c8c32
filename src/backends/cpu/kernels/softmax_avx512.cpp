// The AVX-512 instance of the row softmax (softmax_exp.h), on 16-float vectors.
#include "backends/cpu/kernels/softmax_exp.h"

namespace kiln::cpu::detail {

using Float16Lanes = float __attribute__((vector_size(64)));
using Int16Lanes = int32_t __attribute__((vector_size(64)));

void softmaxRowsAvx512(float* x, int64_t ld, const float* mask, int64_t maskLd, int64_t rows,
                       int64_t n) {
  softmaxRowsOn<Float16Lanes, Int16Lanes>(x, ld, mask, maskLd, rows, n);
}

}  // namespace kiln::cpu::detail
