// mapBinary (backends/cpu/kernels/elementwise_util.h) against a naive numpy-broadcast reference,
// for shapes that take its periodic path (one operand repeating a row along the other's inner
// axes, e.g. an NCHWc tensor times its squeeze-excitation scale) and shapes that do not, either
// operand order, in place, with 1 and 2 threads, on floats, int32 and bool.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

// The element of `in` (shape `shape`, broadcast to `out`) that output element `flat` reads.
int64_t sourceIndex(const Shape& shape, const Shape& out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t coordinate = flat % out[d];
    flat /= out[d];
    const size_t i = d + shape.size() - out.size();
    if (d + shape.size() >= out.size()) {
      if (shape[i] != 1) index += coordinate * stride;
      stride *= shape[i];
    }
  }
  return index;
}

Shape broadcastShape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k + a.size() >= out.size() ? a[k + a.size() - out.size()] : 1;
    const int64_t db = k + b.size() >= out.size() ? b[k + b.size() - out.size()] : 1;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

template <typename T>
Tensor filled(DataType type, const Shape& shape, uint32_t seed) {
  const std::vector<float> v = testing::randomFloats(shapeNumel(shape), seed, -4.0f, 4.0f);
  Tensor t(type, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_same_v<T, bool>)
      t.data<T>()[i] = v[static_cast<size_t>(i)] > 0;
    else if constexpr (std::is_integral_v<T>)
      t.data<T>()[i] = static_cast<T>(v[static_cast<size_t>(i)] * 100);
    else
      t.data<T>()[i] =
          v[static_cast<size_t>(i)] == 0 ? 1.0f : v[static_cast<size_t>(i)];  // Div-safe
  }
  return t;
}

// mapBinary(a, b) with op equals op applied element by element through sourceIndex, exactly.
template <typename T, typename Op>
void expectMatchesReference(DataType type, const Shape& sa, const Shape& sb, Op op, bool inPlace) {
  const Shape out = broadcastShape(sa, sb);
  const Tensor a = filled<T>(type, sa, 1), b = filled<T>(type, sb, 2);
  std::vector<T> want(static_cast<size_t>(shapeNumel(out)));
  for (int64_t i = 0; i < shapeNumel(out); ++i) {
    want[static_cast<size_t>(i)] = static_cast<T>(
        op(a.data<T>()[sourceIndex(sa, out, i)], b.data<T>()[sourceIndex(sb, out, i)]));
  }
  Tensor y(type, out);
  if (inPlace) {
    ASSERT_EQ(sa, out);
    y = a.clone();
    mapBinary<T, T>(y, b, y, op);
  } else {
    mapBinary<T, T>(a, b, y, op);
  }
  for (int64_t i = 0; i < y.numel(); ++i) {
    ASSERT_EQ(y.data<T>()[i], want[static_cast<size_t>(i)]) << "element " << i;
  }
}

struct Case {
  Shape a, b;
  bool periodic;  // takes the periodic path
};

const std::vector<Case> kCases = {
    {{1, 9, 56, 56, 16}, {1, 9, 1, 1, 16}, true},  // NCHWc tensor x squeeze-excitation scale
    {{1, 9, 1, 1, 16}, {1, 9, 56, 56, 16}, true},  // the same, scale first
    {{2, 3, 5, 7, 16}, {2, 3, 1, 1, 16}, true},    // batch 2, rows not a multiple of anything
    {{2, 3, 5, 7, 16}, {1, 3, 1, 1, 16}, true},    // the scale shared by the images
    {{3, 1000, 24}, {24}, true},                   // a bias row; cols does not divide 256
    {{700, 300}, {1, 300}, true},                  // rows longer than the pattern
    {{4, 5, 6}, {4, 1, 6}, true},
    {{1, 9, 56, 56}, {1, 9, 1, 1}, false},  // NCHW per-channel scale: a scalar per run
    {{4, 5, 6}, {4, 5, 1}, false},
    {{4, 5, 6}, {5, 6}, true},      // [5, 6] coalesces to one repeated row of 30
    {{4, 1, 6}, {1, 5, 1}, false},  // both broadcast
    {{7, 9}, {7, 9}, false},
    {{3, 1}, {}, false},
};

TEST(BroadcastMap, PeriodicPathIsTakenWhereExpected) {
  for (const Case& c : kCases) {
    const Shape out = broadcastShape(c.a, c.b);
    const auto cb = coalesceBroadcast<2>(out, {&c.a, &c.b});
    EXPECT_EQ(findPeriodicBroadcast(cb).has_value(), c.periodic)
        << shapeToString(c.a) << " " << shapeToString(c.b);
  }
}

TEST(BroadcastMap, MatchesTheNaiveReferenceForEveryForm) {
  for (int threads : {1, 2}) {
    kiln::testing::ScopedThreads scopedThreads(threads);
    for (const Case& c : kCases) {
      SCOPED_TRACE(shapeToString(c.a) + " op " + shapeToString(c.b) + " threads " +
                   std::to_string(threads));
      const bool aIsOut = broadcastShape(c.a, c.b) == c.a;
      for (bool inPlace : {false, true}) {
        if (inPlace && !aIsOut) continue;
        expectMatchesReference<float>(
            DataType::kFloat32, c.a, c.b, [](float x, float y) { return x * y; }, inPlace);
        expectMatchesReference<float>(
            DataType::kFloat32, c.a, c.b, [](float x, float y) { return x - y; }, inPlace);
        expectMatchesReference<float>(
            DataType::kFloat32, c.a, c.b, [](float x, float y) { return x / y; }, inPlace);
        expectMatchesReference<float>(
            DataType::kFloat32, c.a, c.b, [](float x, float y) { return x + y; }, inPlace);
        expectMatchesReference<int32_t>(
            DataType::kInt32, c.a, c.b, [](int32_t x, int32_t y) { return x - 3 * y; }, inPlace);
        expectMatchesReference<bool>(
            DataType::kBool, c.a, c.b, [](bool x, bool y) { return x && !y; }, inPlace);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
