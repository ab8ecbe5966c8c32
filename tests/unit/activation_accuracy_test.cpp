// Accuracy of the vectorised sigmoid, SiLU and GELU (backends/cpu/activation_simd.h; sigmoid is
// e / (1 + e) or 1 / (1 + e) with e = exp(-|x|), subnormal results included) over the whole float
// range: every 1021st float bit pattern (both signs, subnormals to FLT_MAX), a dense sweep of
// [-20, 20], and +-0, +-inf, NaN; on the AVX-512 and AVX2 epilogues and on the scalar code, against
// double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/activation_simd.h"
#include "backends/cpu/cpu_isa.h"

namespace kiln::cpu {
namespace {

std::vector<float> sweepInputs() {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 1021) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  for (int i = -200000; i <= 200000; ++i) xs.push_back(static_cast<float>(i) * 1e-4f);
  // Every 29th float of [-32, -1/4], where x < 0 stacks the most roundings (exp, x * e, 1 + e, the
  // division), and the worst inputs an exhaustive scan of all 2^32 floats found for each variant.
  for (uint32_t b = 0xbe800000u; b <= 0xc2000000u; b += 29) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  for (float x : {-4.13156843f, -7.56756067f, -12.1248007f, -5.92693138f, -12.1932011f})
    xs.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::min(), -87.3f, -88.8f, -103.9f, -104.5f, -150.0f,
                  88.8f, 16.6f, -16.6f}) {
    xs.push_back(x);
  }
  return xs;
}

double sigmoidReference(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}

double reference(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::kSigmoid:
      return sigmoidReference(x);
    case ActivationKind::kSiLU:
      return std::isinf(x) && x < 0 ? std::nan("") : x * sigmoidReference(x);
    case ActivationKind::kGelu:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    default:
      return x;
  }
}

// The allowed |y - reference|: relative error relativeBound (~2.1 float ulps for sigmoid, ~2.5 for
// SiLU, whose x * e rounds once more; an exhaustive scan of all floats measured 2.6e-7 for SiLU on
// the AVX-512 table exp) plus two subnormal steps (results below FLT_MIN are rounded to a multiple
// of 2^-149, twice), which SiLU multiplies by |x| (x * sigmoid(x) is a normal float down to x ~ -95
// while sigmoid(x) is already subnormal). GELU adds the absolute error of its erf, the
// Abramowitz-Stegun approximation (1.5e-7) evaluated in float as 1 - p * exp(-x^2), which cancels
// near 0: 6e-7 times |x| / 2 (so for x < 0, where GELU is a small difference, its relative error
// is larger).
double relativeBound(ActivationKind kind) { return kind == ActivationKind::kSiLU ? 3e-7 : 2.5e-7; }
double allowedError(ActivationKind kind, double x, double ref) {
  const double subnormalSteps =
      std::ldexp(1.0, -148) * (kind == ActivationKind::kSiLU ? 1 + std::fabs(x) : 1.0);
  double bound = relativeBound(kind) * std::fabs(ref) + subnormalSteps;
  if (kind == ActivationKind::kGelu) bound += 3e-7 * std::fabs(x);
  return bound;
}

// Checks y against the reference for every x; reports the worst relative error seen where the
// reference is a normal float.
void expectAccurate(ActivationKind kind, const std::string& path, const std::vector<float>& xs,
                    const std::vector<float>& ys) {
  double worst = 0;
  int failures = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i], ref = reference(kind, x), y = ys[i];
    bool ok;
    if (std::isnan(ref))
      ok = std::isnan(y);
    else if (std::isinf(ref))
      ok = y == ref;
    else
      ok = std::fabs(y - ref) <= allowedError(kind, x, ref);
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << activationName(kind) << " on " << path << " at x = " << xs[i] << " (bits 0x"
                    << std::hex <<
          [&] {
            uint32_t b;
            std::memcpy(&b, &xs[i], 4);
            return b;
          }() << std::dec
                    << "): got " << ys[i] << ", want " << ref;
    }
    // The relative error where no subnormal took part (sigmoid(x) and the result >= FLT_MIN).
    if (kind != ActivationKind::kGelu && std::isfinite(ref) &&
        std::fabs(ref) >= std::numeric_limits<float>::min() &&
        sigmoidReference(x) >= std::numeric_limits<float>::min()) {
      worst = std::max(worst, std::fabs(y - ref) / std::fabs(ref));
    }
  }
  EXPECT_EQ(failures, 0) << activationName(kind) << " on " << path;
  if (kind != ActivationKind::kGelu) {
    EXPECT_LE(worst, relativeBound(kind)) << activationName(kind) << " on " << path;
    std::printf("%s on %s: max relative error %.3g over %zu inputs\n", activationName(kind),
                path.c_str(), worst, xs.size());
  }
}

template <ActivationKind K>
std::vector<float> scalarActivation(const std::vector<float>& xs) {
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    ys[i] = simd::activate<K, float, int32_t>(Activation{K, 0, 0}, xs[i]);
  return ys;
}

TEST(ActivationAccuracy, SigmoidSiluAndGeluOverTheWholeFloatRange) {
  const std::vector<float> xs = sweepInputs();
  for (ActivationKind kind :
       {ActivationKind::kSigmoid, ActivationKind::kSiLU, ActivationKind::kGelu}) {
    for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (isa > detectedCpuIsa()) continue;
      ScopedCpuIsaLimit limit(isa);
      std::vector<float> ys = xs;
      applyEpilogue(Activation{kind, 0, 0}, ys.data(), static_cast<int64_t>(ys.size()), 0.0f,
                    nullptr);
      expectAccurate(kind, cpuIsaName(isa), xs, ys);
    }
  }
  expectAccurate(ActivationKind::kSigmoid, "scalar", xs,
                 scalarActivation<ActivationKind::kSigmoid>(xs));
  expectAccurate(ActivationKind::kSiLU, "scalar", xs, scalarActivation<ActivationKind::kSiLU>(xs));
  expectAccurate(ActivationKind::kGelu, "scalar", xs, scalarActivation<ActivationKind::kGelu>(xs));
}

// expKernel (Softmax, GELU's erf) on 8 lanes and on scalars: every 997th float of [-87.3, 88.3]
// within 2 ulp (relative 2.4e-7) of the double-precision exp. (The 16-lane exp is covered by the
// AVX-512 sigmoid and SiLU above, which are built on it.)
TEST(ActivationAccuracy, ExpKernelWithinTwoUlp) {
  double worst = 0;
  float worstX = 0;
  std::vector<float> xs;
  for (float lo : {-87.3f, 0.0f}) {
    const float hi = lo < 0 ? 0.0f : 88.3f;
    uint32_t b, e;
    std::memcpy(&b, lo < 0 ? &hi : &lo, 4);
    std::memcpy(&e, lo < 0 ? &lo : &hi, 4);
    if (lo < 0) b |= 0x80000000u;  // -0.0 up to -87.3 in bit order
    for (uint32_t u = b; u <= e; u += 997) {
      float x;
      std::memcpy(&x, &u, 4);
      xs.push_back(x);
    }
  }
  for (size_t i = 0; i + 8 <= xs.size(); i += 8) {
    const Float8 y = expKernel<Float8, Int8>(load8(&xs[i]));
    for (int l = 0; l < 8; ++l) {
      const float x = xs[i + l];
      const double ref = std::exp(double(x));
      for (float got : {y[l], expKernel<float, int32_t>(x)}) {
        const double err = std::fabs(got - ref) / ref;
        if (err > worst) worst = err, worstX = x;
      }
    }
  }
  EXPECT_LE(worst, 2.4e-7) << "at x = " << worstX;
  std::printf("expKernel: max relative error %.3g over %zu inputs\n", worst, xs.size());
}

TEST(ActivationAccuracy, SigmoidLimitsAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa > detectedCpuIsa()) continue;
    ScopedCpuIsaLimit limit(isa);
    std::vector<float> y(16, std::numeric_limits<float>::quiet_NaN());
    y[1] = inf, y[2] = -inf, y[3] = 0.0f, y[4] = -200.0f, y[5] = 200.0f;
    applyEpilogue(Activation{ActivationKind::kSigmoid, 0, 0}, y.data(), 16, 0.0f, nullptr);
    SCOPED_TRACE(cpuIsaName(isa));
    EXPECT_TRUE(std::isnan(y[0]));
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], 0.5f);
    EXPECT_EQ(y[4], 0.0f);
    EXPECT_EQ(y[5], 1.0f);
    for (int i = 6; i < 16; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  }
}

}  // namespace
}  // namespace kiln::cpu
