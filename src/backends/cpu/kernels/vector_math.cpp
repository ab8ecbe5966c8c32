#include "backends/cpu/kernels/vector_math.h"

#include <immintrin.h>

#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"

// libmvec's AVX2 variants ("d" ISA, 8 float lanes), by their vector-ABI names.
extern "C" {
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_tanhf(__m256);
__m256 _ZGVdN8v_expf(__m256);
}

namespace kiln::cpu {
namespace {

template <__m256 (*kVector)(__m256), float (*kScalar)(float)>
void mapRange(const float* x, float* y, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) _mm256_storeu_ps(y + i, kVector(_mm256_loadu_ps(x + i)));
  for (; i < end; ++i) y[i] = kScalar(x[i]);
}

template <__m256 (*kVector)(__m256), float (*kScalar)(float)>
void mapInParallel(const float* x, float* y, int64_t n) {
  parallelForAtLeast(n, kMinElementsPerThread, [&](int64_t begin, int64_t end) {
    mapRange<kVector, kScalar>(x, y, begin, end);
  });
}

float erfScalar(float v) { return std::erf(v); }
float tanhScalar(float v) { return std::tanh(v); }
float expScalar(float v) { return std::exp(v); }

}  // namespace

void applyVectorMath(VectorMathFn fn, const float* x, float* y, int64_t n) {
  switch (fn) {
    case VectorMathFn::kErf:
      return mapInParallel<_ZGVdN8v_erff, erfScalar>(x, y, n);
    case VectorMathFn::kTanh:
      return mapInParallel<_ZGVdN8v_tanhf, tanhScalar>(x, y, n);
    case VectorMathFn::kExp:
      return mapInParallel<_ZGVdN8v_expf, expScalar>(x, y, n);
  }
}

}  // namespace kiln::cpu
