// Float32 erf, tanh and exp over arrays through glibc's vector math library (libmvec, glibc >=
// 2.35): eight lanes per call, within a few ulp of the scalar functions (glibc documents the
// bounds), NaN and infinities as they give. The scalar functions finish each array's tail.
#pragma once
#include <cstdint>

namespace kiln::cpu {

enum class VectorMathFn { kErf, kTanh, kExp };

/// y[i] = fn(x[i]) for i in [0, n); y may be x. Split over the current thread pool when n is large.
void applyVectorMath(VectorMathFn fn, const float* x, float* y, int64_t n);

}  // namespace kiln::cpu
