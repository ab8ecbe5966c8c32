// The non-GEMM kernels split over the thread pool (elementwise maps with broadcasting, pooling,
// global pooling, Concat): ranged broadcast iteration covers exactly the serial runs, and each op
// gives the same values on 1 and 2 threads, equal to a plain reference loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/broadcast.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln::testing {
namespace {

Tensor randomTensor(const Shape& shape, uint32_t seed) {
  Tensor t(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

std::vector<float> valuesOf(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

void addIntsAttr(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void addIntAttr(onnx::NodeProto* node, const std::string& name, int64_t v) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// Runs a one-node model (built by `build`, taking graph inputs x0, x1, ... and producing y) with
// `threads` threads and returns y.
template <typename Build>
std::vector<float> runOnThreads(const std::string& name, const std::vector<Tensor>& inputs,
                                int threads, Build build) {
  onnx::ModelProto model = makeModel(13);
  std::vector<std::string> names;
  NamedTensors feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    addInput(model, names.back(), inputs[i].shape());
    feeds.emplace_back(names.back(), inputs[i]);
  }
  auto* node = model.mutable_graph()->add_node();
  node->set_name(name);
  for (const auto& n : names) node->add_input(n);
  node->add_output("y");
  build(node);
  auto* out = model.mutable_graph()->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  SessionOptions options;
  options.threads = threads;
  Session session(saveModel(model, tempDir("parallel_" + name) / "model.onnx"), options);
  return valuesOf(session.run(feeds).at(0).second);
}

// Runs on 1 and 2 threads, expects bitwise-equal results, returns them.
template <typename Build>
std::vector<float> runSerialAndParallel(const std::string& name, const std::vector<Tensor>& inputs,
                                        Build build) {
  std::vector<float> one = runOnThreads(name, inputs, 1, build);
  std::vector<float> two = runOnThreads(name, inputs, 2, build);
  EXPECT_EQ(one, two) << name << ": 1 and 2 threads differ";
  return two;
}

TEST(ParallelKernels, BroadcastRangesCoverTheSerialRuns) {
  const Shape out{3, 5, 7, 11};
  const Shape a{3, 1, 7, 11}, b{5, 1, 1};
  // Serial: input offsets of every output element.
  std::vector<std::array<int64_t, 2>> expected(static_cast<size_t>(shapeNumel(out)));
  cpu::forEachBroadcastRun<2>(
      out, {&a, &b},
      [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n,
          const std::array<int64_t, 2>& st) {
        for (int64_t j = 0; j < n; ++j)
          expected[static_cast<size_t>(o + j)] = {off[0] + j * st[0], off[1] + j * st[1]};
      });
  const auto cb = cpu::coalesceBroadcast<2>(out, {&a, &b});
  for (int64_t cut : {1, 2, 13, 77, 500, 1154}) {  // ranges that start and end mid-run
    std::vector<std::array<int64_t, 2>> got(expected.size(), {-1, -1});
    for (int64_t begin = 0; begin < shapeNumel(out); begin += cut) {
      const int64_t end = std::min(begin + cut, shapeNumel(out));
      cpu::forEachBroadcastRunIn<2>(
          cb, begin, end,
          [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n,
              const std::array<int64_t, 2>& st) {
            ASSERT_GE(o, begin);
            ASSERT_LE(o + n, end);
            for (int64_t j = 0; j < n; ++j)
              got[static_cast<size_t>(o + j)] = {off[0] + j * st[0], off[1] + j * st[1]};
          });
    }
    EXPECT_EQ(got, expected) << "ranges of " << cut;
  }
}

TEST(ParallelKernels, BinaryOpsWithBroadcastingMatchTheFormula) {
  struct Case {
    Shape a, b;
  };
  // Same shape (odd size), per-channel [C,1,1], scalar, and a middle-dim broadcast.
  for (const Case& c : {Case{{1, 37, 41, 43}, {1, 37, 41, 43}}, Case{{1, 64, 45, 47}, {64, 1, 1}},
                        Case{{2, 33, 29, 31}, {1}}, Case{{3, 1, 50, 70}, {3, 40, 1, 70}}}) {
    Tensor a = randomTensor(c.a, 1), b = randomTensor(c.b, 2);
    for (const char* op : {"Add", "Mul", "Sub", "Div"}) {
      std::vector<float> y =
          runSerialAndParallel(op, {a, b}, [&](onnx::NodeProto* n) { n->set_op_type(op); });
      // Reference: numpy broadcasting through strides.
      Shape out(std::max(c.a.size(), c.b.size()));
      for (size_t d = 0; d < out.size(); ++d) {
        auto dimOf = [&](const Shape& s) {
          return d + s.size() >= out.size() ? s[d + s.size() - out.size()] : int64_t{1};
        };
        out[d] = std::max(dimOf(c.a), dimOf(c.b));
      }
      const auto sa = cpu::broadcastStrides(c.a, out), sb = cpu::broadcastStrides(c.b, out);
      ASSERT_EQ(static_cast<int64_t>(y.size()), shapeNumel(out));
      std::vector<int64_t> idx(out.size(), 0);
      for (size_t i = 0; i < y.size(); ++i) {
        int64_t ia = 0, ib = 0;
        for (size_t d = 0; d < out.size(); ++d) ia += idx[d] * sa[d], ib += idx[d] * sb[d];
        const float x = a.data<float>()[ia], z = b.data<float>()[ib];
        const float want = op[0] == 'A'   ? x + z
                           : op[0] == 'M' ? x * z
                           : op[0] == 'S' ? x - z
                                          : x / z;
        ASSERT_EQ(y[i], want) << op << " at " << i;
        for (size_t d = out.size(); d-- > 0;) {
          if (++idx[d] < out[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
}

TEST(ParallelKernels, UnaryOpsOnLargeTensors) {
  Tensor x = randomTensor({1, 32, 63, 65}, 3);
  std::vector<float> y =
      runSerialAndParallel("Relu", {x}, [](onnx::NodeProto* n) { n->set_op_type("Relu"); });
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y[i], std::max(x.data<float>()[i], 0.0f));
  y = runSerialAndParallel("Sigmoid", {x}, [](onnx::NodeProto* n) { n->set_op_type("Sigmoid"); });
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_NEAR(y[i], 1.0f / (1.0f + std::exp(-x.data<float>()[i])), 1e-6f);
}

// Reference 2-D pooling over an N x C x H x W tensor with explicit pads.
std::vector<float> referencePool(const Tensor& x, bool max, int64_t k, int64_t s, int64_t pad,
                                 int64_t outH, int64_t outW, bool countPad) {
  const int64_t planes = x.dim(0) * x.dim(1), H = x.dim(2), W = x.dim(3);
  std::vector<float> y;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oh = 0; oh < outH; ++oh) {
      for (int64_t ow = 0; ow < outW; ++ow) {
        float best = -std::numeric_limits<float>::infinity();
        double sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t i = oh * s - pad; i < oh * s - pad + k; ++i) {
          for (int64_t j = ow * s - pad; j < ow * s - pad + k; ++j) {
            if (i < H + pad && j < W + pad) ++padded;
            if (i < 0 || j < 0 || i >= H || j >= W) continue;
            const float v = x.data<float>()[(p * H + i) * W + j];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        }
        y.push_back(max ? best
                        : static_cast<float>(sum / static_cast<double>(countPad ? padded : count)));
      }
    }
  }
  return y;
}

TEST(ParallelKernels, MaxPoolAndAveragePoolWithPadsAndCeilMode) {
  Tensor x = randomTensor({1, 24, 57, 55}, 4);
  struct Case {
    int64_t k, s, pad, ceil;
  };
  for (const Case& c : {Case{3, 2, 1, 0}, Case{2, 2, 0, 0}, Case{3, 2, 0, 1}, Case{3, 1, 1, 0}}) {
    auto outDim = [&](int64_t n) {
      const int64_t span = n + 2 * c.pad - c.k;
      int64_t o = (c.ceil ? (span + c.s - 1) / c.s : span / c.s) + 1;
      if (c.ceil && (o - 1) * c.s >= n + c.pad)
        --o;  // the last window must start inside the input or left pad
      return o;
    };
    for (bool max : {true, false}) {
      for (bool countPad : max ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
        const std::string op = max ? "MaxPool" : "AveragePool";
        std::vector<float> y = runSerialAndParallel(op, {x}, [&](onnx::NodeProto* n) {
          n->set_op_type(op);
          addIntsAttr(n, "kernel_shape", {c.k, c.k});
          addIntsAttr(n, "strides", {c.s, c.s});
          addIntsAttr(n, "pads", {c.pad, c.pad, c.pad, c.pad});
          addIntAttr(n, "ceil_mode", c.ceil);
          if (!max) addIntAttr(n, "count_include_pad", countPad ? 1 : 0);
        });
        std::vector<float> want =
            referencePool(x, max, c.k, c.s, c.pad, outDim(57), outDim(55), countPad);
        ASSERT_EQ(y.size(), want.size()) << op << " k" << c.k << " s" << c.s;
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], want[i], 1e-5f) << op << " k" << c.k << " s" << c.s << " at " << i;
      }
    }
  }
}

TEST(ParallelKernels, GlobalAveragePoolOnManyPlanes) {
  Tensor x = randomTensor({2, 96, 15, 13}, 5);
  std::vector<float> y = runSerialAndParallel(
      "GlobalAveragePool", {x}, [](onnx::NodeProto* n) { n->set_op_type("GlobalAveragePool"); });
  ASSERT_EQ(y.size(), 2u * 96u);
  for (int64_t p = 0; p < 2 * 96; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < 15 * 13; ++i) sum += x.data<float>()[p * 15 * 13 + i];
    ASSERT_NEAR(y[p], sum / (15 * 13), 1e-6) << p;
  }
}

TEST(ParallelKernels, ConcatAlongChannelsAndInnerAxes) {
  Tensor a = randomTensor({2, 40, 33, 35}, 6), b = randomTensor({2, 24, 33, 35}, 7),
         c = randomTensor({2, 3, 33, 35}, 8);
  for (int64_t batch : {1, 2}) {
    auto take = [&](const Tensor& t) {
      Shape s = t.shape();
      s[0] = batch;
      Tensor r(DataType::kFloat32, s);
      std::copy(t.data<float>(), t.data<float>() + r.numel(), r.data<float>());
      return r;
    };
    const Tensor ta = take(a), tb = take(b), tc = take(c);
    std::vector<float> y = runSerialAndParallel("Concat", {ta, tb, tc}, [](onnx::NodeProto* n) {
      n->set_op_type("Concat");
      addIntAttr(n, "axis", 1);
    });
    const int64_t plane = 33 * 35;
    std::vector<float> want;
    for (int64_t n = 0; n < batch; ++n)
      for (const Tensor* t : {&ta, &tb, &tc})
        want.insert(want.end(), t->data<float>() + n * t->dim(1) * plane,
                    t->data<float>() + (n + 1) * t->dim(1) * plane);
    EXPECT_EQ(y, want) << "batch " << batch;
  }
}

TEST(ParallelKernels, TransposeRowAndTiledPaths) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  // [B,S,H,D] -> [B,H,S,D] copies rows of D; swapping the last two dims takes the tiled path.
  for (const Case& c :
       {Case{{1, 128, 12, 64}, {0, 2, 1, 3}}, Case{{2, 24, 35, 530}, {0, 1, 3, 2}}}) {
    Tensor x = randomTensor(c.shape, 9);
    std::vector<float> y = runSerialAndParallel("Transpose", {x}, [&](onnx::NodeProto* n) {
      n->set_op_type("Transpose");
      addIntsAttr(n, "perm", c.perm);
    });
    Shape out;
    for (int64_t p : c.perm) out.push_back(c.shape[static_cast<size_t>(p)]);
    const auto inStrides = cpu::broadcastStrides(c.shape, c.shape);
    std::vector<int64_t> idx(4, 0);
    for (size_t i = 0; i < y.size(); ++i) {
      int64_t at = 0;
      for (size_t d = 0; d < 4; ++d) at += idx[d] * inStrides[static_cast<size_t>(c.perm[d])];
      ASSERT_EQ(y[i], x.data<float>()[at]) << i;
      for (size_t d = 4; d-- > 0;) {
        if (++idx[d] < out[d]) break;
        idx[d] = 0;
      }
    }
  }
}

// Resize of X's last two axes by sh and sw (half_pixel) on 1 and 2 threads: the results, once.
std::vector<float> resizeWithScales(const Tensor& x, float sh, float sw, const char* mode) {
  Tensor scales(DataType::kFloat32, {4});
  const float values[4] = {1, 1, sh, sw};
  std::copy(values, values + 4, scales.data<float>());
  return runSerialAndParallel("Resize", {x, scales}, [&](onnx::NodeProto* n) {
    n->set_op_type("Resize");
    n->clear_input();  // X, no roi, scales
    n->add_input("x0");
    n->add_input("");
    n->add_input("x1");
    auto* a = n->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode);
  });
}

TEST(ParallelKernels, ResizeGivesTheSameValuesOnOneAndTwoThreads) {
  Tensor x = randomTensor({1, 3, 40, 44}, 10);
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    std::vector<float> y = resizeWithScales(x, 3, 3, mode);
    ASSERT_EQ(y.size(), 3u * 120u * 132u) << mode;
    // Output pixel (3i+1, 3j+1) sits exactly on input pixel (i, j) (half_pixel), for every mode.
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t j = 0; j < 44; ++j)
        ASSERT_NEAR(y[static_cast<size_t>((3 * i + 1) * 132 + 3 * j + 1)],
                    x.data<float>()[i * 44 + j], 1e-5f)
            << mode;
  }
}

// Bilinear resizing (half_pixel) of one plane, straight from the ONNX formula, in double.
double bilinearAt(const float* plane, int64_t h, int64_t w, double sh, double sw, int64_t oy,
                  int64_t ox) {
  auto sample = [](double out, double scale, int64_t len, int64_t& i0, int64_t& i1) {
    const double original = (out + 0.5) / scale - 0.5;
    const double lower = std::floor(original);
    i0 = std::clamp<int64_t>(static_cast<int64_t>(lower), 0, len - 1);
    i1 = std::clamp<int64_t>(static_cast<int64_t>(lower) + 1, 0, len - 1);
    return original - lower;
  };
  int64_t y0, y1, x0, x1;
  const double fy = sample(static_cast<double>(oy), sh, h, y0, y1);
  const double fx = sample(static_cast<double>(ox), sw, w, x0, x1);
  auto at = [&](int64_t y, int64_t x) { return static_cast<double>(plane[y * w + x]); };
  return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) +
         fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
}

TEST(ParallelKernels, ResizeOfBothAxesMatchesTheFormulaInEitherPassOrder) {
  // 16x in both axes (a segmentation head's upsampling: the rows are resized first, then
  // blended) and 0.5x by 3x (the shrinking axis first): both against the 2-D formula.
  const int64_t h = 6, w = 5;
  Tensor x = randomTensor({1, 2, h, w}, 11);
  for (auto [sh, sw] : {std::pair<float, float>{16, 16}, {0.5f, 3}}) {
    const int64_t oh = static_cast<int64_t>(std::floor(h * sh)),
                  ow = static_cast<int64_t>(std::floor(w * sw));
    std::vector<float> y = resizeWithScales(x, sh, sw, "linear");
    ASSERT_EQ(y.size(), static_cast<size_t>(2 * oh * ow));
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
          ASSERT_NEAR(y[static_cast<size_t>((c * oh + oy) * ow + ox)],
                      bilinearAt(x.data<float>() + c * h * w, h, w, sh, sw, oy, ox), 1e-5)
              << "scales " << sh << " x " << sw << " at " << c << ", " << oy << ", " << ox;
  }
}

TEST(ParallelKernels, NearestResizeOfTheLastAxisCopiesTheNearestElement) {
  Tensor x = randomTensor({1, 8, 40, 40}, 12);  // a detector neck's 2x upsampling
  std::vector<float> y = resizeWithScales(x, 2, 2, "nearest");
  ASSERT_EQ(y.size(), 8u * 80u * 80u);
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t oy = 0; oy < 80; ++oy)
      for (int64_t ox = 0; ox < 80; ++ox)
        ASSERT_EQ(y[static_cast<size_t>((c * 80 + oy) * 80 + ox)],
                  x.data<float>()[(c * 40 + oy / 2) * 40 + ox / 2]);
}

}  // namespace
}  // namespace kiln::testing
