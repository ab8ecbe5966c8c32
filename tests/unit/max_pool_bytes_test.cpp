// MaxPool over uint8 / int8 on AVX-512 (kernels/pool_max_bytes.h) against the generic row kernel
// (the AVX2 limit) and a plain window-by-window reference, bit for bit: ResNet's 3x3 stride 2 pad 1
// and other kernels, strides, dilations, asymmetric pads, ceil_mode, 1-D and 3-D windows, odd and
// one-element sizes, rows longer than 64 bytes, values at both ends of the range.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using cpu::CpuIsa;
using namespace kiln::testing;

struct PoolCase {
  std::vector<int64_t> spatial;  // input spatial dims
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceilMode = 0;
};

std::string describe(const PoolCase& c) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += std::to_string(x) + ",";
    return s;
  };
  return "in " + list(c.spatial) + " k " + list(c.kernel) + " s " + list(c.strides) + " p " +
         list(c.pads) + " d " + list(c.dilations) + " ceil " + std::to_string(c.ceilMode);
}

// Random bytes with the two ends of the range frequent.
template <typename T>
Tensor randomInput(std::mt19937& rng, const Shape& shape) {
  Tensor x(std::is_same_v<T, uint8_t> ? DataType::kUint8 : DataType::kInt8, shape);
  std::uniform_int_distribution<int> dist(-8, 263);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int v = std::clamp(dist(rng), 0, 255) + std::numeric_limits<T>::lowest();
    x.data<T>()[i] = static_cast<T>(v);
  }
  return x;
}

Tensor runMaxPool(const PoolCase& c, const Tensor& x) {
  SingleNodeModel m("MaxPool", 12);
  m.attr("kernel_shape", c.kernel).attr("strides", c.strides).attr("pads", c.pads);
  m.attr("dilations", c.dilations).attr("ceil_mode", c.ceilMode);
  m.input("x", x).output("y", x.dtype());
  return m.run()[0].second;
}

// Output element (n, c, spatial index) as the ONNX definition gives it: the maximum of the taps
// inside the input, 0 where there are none.
template <typename T>
void checkAgainstReference(const PoolCase& c, const Tensor& x, const Tensor& y,
                           const std::string& what) {
  const size_t rank = c.spatial.size();
  const int64_t planes = x.dim(0) * x.dim(1);
  int64_t inPlane = 1, outPlane = 1;
  for (size_t d = 0; d < rank; ++d) {
    inPlane *= x.dim(2 + d);
    outPlane *= y.dim(2 + d);
  }
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t o = 0; o < outPlane; ++o) {
      std::vector<int64_t> oi(rank);
      for (size_t d = rank, rest = static_cast<size_t>(o); d-- > 0;) {
        oi[d] = static_cast<int64_t>(rest) % y.dim(2 + d);
        rest /= static_cast<size_t>(y.dim(2 + d));
      }
      int64_t taps = 1;
      for (int64_t k : c.kernel) taps *= k;
      bool any = false;
      int best = 0;
      for (int64_t t = 0; t < taps; ++t) {
        int64_t rest = t, at = 0;
        bool inside = true;
        for (size_t d = rank; d-- > 0;) {
          const int64_t kd = rest % c.kernel[d];
          rest /= c.kernel[d];
          const int64_t i = oi[d] * c.strides[d] - c.pads[d] + kd * c.dilations[d];
          inside = inside && i >= 0 && i < x.dim(2 + d);
        }
        if (!inside) continue;
        rest = t;
        std::vector<int64_t> ii(rank);
        for (size_t d = rank; d-- > 0;) {
          ii[d] = oi[d] * c.strides[d] - c.pads[d] + (rest % c.kernel[d]) * c.dilations[d];
          rest /= c.kernel[d];
        }
        for (size_t d = 0; d < rank; ++d) at = at * x.dim(2 + d) + ii[d];
        const int v = x.data<T>()[p * inPlane + at];
        best = any ? std::max(best, v) : v;
        any = true;
      }
      ASSERT_EQ(int(y.data<T>()[p * outPlane + o]), any ? best : 0)
          << what << " plane " << p << " output " << o;
    }
  }
}

template <typename T>
void checkCase(std::mt19937& rng, const PoolCase& c) {
  Shape shape{2, 3};
  for (int64_t s : c.spatial) shape.push_back(s);
  const Tensor x = randomInput<T>(rng, shape);
  const Tensor wide = runMaxPool(c, x);
  Tensor generic;
  {
    cpu::ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
    generic = runMaxPool(c, x);
  }
  const std::string what = describe(c) + (std::is_same_v<T, int8_t> ? " int8" : " uint8");
  ASSERT_EQ(wide.shape(), generic.shape()) << what;
  for (int64_t i = 0; i < wide.numel(); ++i)
    ASSERT_EQ(int(wide.data<T>()[i]), int(generic.data<T>()[i])) << what << " element " << i;
  checkAgainstReference<T>(c, x, wide, what);
}

std::vector<PoolCase> twoDimensionalCases() {
  std::vector<PoolCase> cases;
  for (int64_t h : {1, 2, 7}) {
    for (int64_t w : {1, 3, 65, 130}) {
      const std::vector<int64_t> in{h, w};
      cases.push_back({in, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}});  // ResNet's stem pool
      cases.push_back({in, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}});
      cases.push_back({in, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}});
      cases.push_back({in, {2, 2}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 1});
      cases.push_back({in, {1, 3}, {3, 3}, {0, 1, 0, 2}, {1, 1}});
      cases.push_back({in, {3, 2}, {2, 1}, {2, 0, 0, 1}, {1, 2}});
      cases.push_back({in, {3, 3}, {2, 2}, {0, 0, 0, 0}, {2, 2}, 1});
      cases.push_back({in, {5, 4}, {1, 2}, {2, 3, 1, 0}, {1, 1}});
    }
  }
  // Keep the windows that fit their padded input (the others are errors).
  std::erase_if(cases, [](const PoolCase& c) {
    for (size_t d = 0; d < c.spatial.size(); ++d) {
      const int64_t extent = (c.kernel[d] - 1) * c.dilations[d] + 1;
      if (extent > c.spatial[d] + c.pads[d] + c.pads[d + c.spatial.size()]) return true;
    }
    return false;
  });
  return cases;
}

TEST(MaxPoolBytes, TwoDimensionalWindowsMatchTheGenericKernelAndTheDefinition) {
  std::mt19937 rng(3);
  // The types alternate from window to window and from one input size to the next.
  const std::vector<PoolCase> cases = twoDimensionalCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    const PoolCase& c = cases[i];
    if ((i + c.spatial[0] + c.spatial[1]) % 2)
      checkCase<int8_t>(rng, c);
    else
      checkCase<uint8_t>(rng, c);
  }
}

TEST(MaxPoolBytes, OneAndThreeDimensionalWindowsMatch) {
  std::mt19937 rng(4);
  const std::vector<PoolCase> cases{
      {{1}, {1}, {1}, {0, 0}, {1}},
      {{100}, {3}, {2}, {1, 1}, {1}},
      {{67}, {4}, {3}, {2, 1}, {2}, 1},
      {{5, 6, 70}, {3, 2, 3}, {2, 1, 2}, {1, 0, 1, 1, 1, 1}, {1, 2, 1}},
      {{3, 1, 9}, {2, 1, 2}, {1, 1, 1}, {0, 0, 0, 1, 0, 1}, {1, 1, 3}},
  };
  for (const PoolCase& c : cases) {
    checkCase<uint8_t>(rng, c);
    checkCase<int8_t>(rng, c);
  }
}

// ResNet-50's stem pool at its full plane size, 112 x 112: six planes, split over the threads.
TEST(MaxPoolBytes, ResNetStemPoolMatches) {
  std::mt19937 rng(5);
  const PoolCase c{{112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}};
  checkCase<uint8_t>(rng, c);
  checkCase<int8_t>(rng, c);
}

}  // namespace
}  // namespace kiln
