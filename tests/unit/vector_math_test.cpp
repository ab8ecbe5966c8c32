// Erf, Tanh and Exp on float32 (libmvec's eight-lane functions, kernels/vector_math.cpp) against
// the scalar functions in double: within 4 ulp over a sweep of magnitudes, with NaN, infinities,
// signed zeros and subnormals, and a tail that is not a multiple of eight.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "single_node_model.h"

namespace kiln {
namespace {

using namespace kiln::testing;

std::vector<float> sweep() {
  std::vector<float> v{0.0f,
                       -0.0f,
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(),
                       1e-40f,
                       -1e-40f,
                       88.7f,
                       -103.0f,
                       89.0f};
  for (float m = 1e-6f; m < 20.0f; m *= 1.07f) {
    v.push_back(m);
    v.push_back(-m);
  }
  v.push_back(0.5f);  // 8k + 3 values in all: the scalar tail runs too
  while (v.size() % 8 != 3) v.push_back(1.25f);
  return v;
}

float ulpsBetween(float got, double expected) {
  const float e = static_cast<float>(expected);
  if (got == e) return 0;
  const float ulp =
      std::nextafter(std::fabs(e), std::numeric_limits<float>::infinity()) - std::fabs(e);
  return static_cast<float>(std::fabs(got - expected) / ulp);
}

void expectClose(const std::string& op, double (*reference)(double)) {
  const std::vector<float> x = sweep();
  const int64_t n = static_cast<int64_t>(x.size());
  const Tensor y = SingleNodeModel(op, 13)
                       .input("x", Tensor::fromVector<float>(DataType::kFloat32, {n}, x))
                       .output("y")
                       .run()[0]
                       .second;
  for (int64_t i = 0; i < n; ++i) {
    const double expected = reference(x[static_cast<size_t>(i)]);
    const float got = y.data<float>()[i];
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << op << "(" << x[static_cast<size_t>(i)] << ")";
    } else {
      EXPECT_LE(ulpsBetween(got, expected), 4.0f)
          << op << "(" << x[static_cast<size_t>(i)] << ") = " << got << ", expected " << expected;
      if (expected == 0)
        EXPECT_EQ(std::signbit(got), std::signbit(expected))
            << op << "(" << x[static_cast<size_t>(i)] << ")";
    }
  }
}

TEST(VectorMath, ErfWithinFourUlp) {
  expectClose("Erf", [](double v) { return std::erf(v); });
}
TEST(VectorMath, TanhWithinFourUlp) {
  expectClose("Tanh", [](double v) { return std::tanh(v); });
}
TEST(VectorMath, ExpWithinFourUlp) {
  expectClose("Exp", [](double v) { return std::exp(v); });
}

}  // namespace
}  // namespace kiln
