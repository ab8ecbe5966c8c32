// The float32 LSTM kernel (SGEMM products over the whole batch) against a naive double-precision
// LSTM written from the ONNX definition: gates i, o, f, c; default activations; both layouts,
// every direction, uneven sequence lengths, initial states, all three outputs; W and R as graph
// inputs and as initializers (which the kernel packs once when it is made).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "model_builder.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct LstmCase {
  int64_t seq, batch, input, hidden;
  std::string direction;  // forward, reverse, bidirectional
  int64_t layout;
  std::vector<int32_t> lengths;  // empty: every sequence is seq long
  bool constantWeights = false;  // W and R as initializers rather than graph inputs
  int threads = 1;               // the pool's threads (2: a step's entries in parallel)
};

struct LstmValues {
  std::vector<float> x, w, r, b, h0, c0;
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// Y, Y_h, Y_c as the ONNX definition computes them, in double.
std::vector<std::vector<float>> referenceLstm(const LstmCase& c, const LstmValues& v) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, h = c.hidden, n = 4 * h;
  std::vector<float> y(static_cast<size_t>(c.seq * dirs * c.batch * h), 0.0f);
  std::vector<float> yh(static_cast<size_t>(dirs * c.batch * h)), yc(yh.size());
  auto xAt = [&](int64_t t, int64_t b, int64_t i) {
    return v
        .x[static_cast<size_t>((c.layout == 0 ? t * c.batch + b : b * c.seq + t) * c.input + i)];
  };
  auto yIndex = [&](int64_t t, int64_t d, int64_t b, int64_t j) {
    return static_cast<size_t>(
        (c.layout == 0 ? (t * dirs + d) * c.batch + b : (b * c.seq + t) * dirs + d) * h + j);
  };
  auto stateIndex = [&](int64_t d, int64_t b, int64_t j) {
    return static_cast<size_t>((c.layout == 0 ? d * c.batch + b : b * dirs + d) * h + j);
  };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = c.lengths.empty() ? c.seq : c.lengths[static_cast<size_t>(b)];
      std::vector<double> hs(static_cast<size_t>(h)), cs(static_cast<size_t>(h));
      for (int64_t j = 0; j < h; ++j) {
        hs[static_cast<size_t>(j)] = v.h0[stateIndex(d, b, j)];
        cs[static_cast<size_t>(j)] = v.c0[stateIndex(d, b, j)];
      }
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        std::vector<double> g(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) {
          double acc =
              v.b[static_cast<size_t>(d * 2 * n + k)] + v.b[static_cast<size_t>(d * 2 * n + n + k)];
          for (int64_t i = 0; i < c.input; ++i)
            acc += double(xAt(t, b, i)) * v.w[static_cast<size_t>((d * n + k) * c.input + i)];
          for (int64_t j = 0; j < h; ++j)
            acc += hs[static_cast<size_t>(j)] * v.r[static_cast<size_t>((d * n + k) * h + j)];
          g[static_cast<size_t>(k)] = acc;
        }
        for (int64_t j = 0; j < h; ++j) {
          const double in = sigmoid(g[static_cast<size_t>(j)]);
          const double out = sigmoid(g[static_cast<size_t>(h + j)]);
          const double forget = sigmoid(g[static_cast<size_t>(2 * h + j)]);
          const double cell = std::tanh(g[static_cast<size_t>(3 * h + j)]);
          cs[static_cast<size_t>(j)] = forget * cs[static_cast<size_t>(j)] + in * cell;
          hs[static_cast<size_t>(j)] = out * std::tanh(cs[static_cast<size_t>(j)]);
          y[yIndex(t, d, b, j)] = static_cast<float>(hs[static_cast<size_t>(j)]);
        }
      }
      for (int64_t j = 0; j < h; ++j) {
        yh[stateIndex(d, b, j)] = len == 0 ? 0.0f : static_cast<float>(hs[static_cast<size_t>(j)]);
        yc[stateIndex(d, b, j)] = len == 0 ? 0.0f : static_cast<float>(cs[static_cast<size_t>(j)]);
      }
    }
  }
  return {y, yh, yc};
}

void checkLstm(const LstmCase& c, unsigned seed) {
  SCOPED_TRACE("seq " + std::to_string(c.seq) + " batch " + std::to_string(c.batch) + " hidden " +
               std::to_string(c.hidden) + " " + c.direction + " layout " +
               std::to_string(c.layout));
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, h = c.hidden, n = 4 * h;
  uint32_t stream = seed * 16;  // one seed per tensor
  auto uniform = [&](size_t n, float scale) {
    return randomFloats(static_cast<int64_t>(n), stream++, -scale, scale);
  };
  LstmValues v;
  v.x = uniform(static_cast<size_t>(c.seq * c.batch * c.input), 1.0f);
  v.w = uniform(static_cast<size_t>(dirs * n * c.input), 0.5f);
  v.r = uniform(static_cast<size_t>(dirs * n * h), 0.5f);
  v.b = uniform(static_cast<size_t>(dirs * 2 * n), 0.5f);
  v.h0 = uniform(static_cast<size_t>(dirs * c.batch * h), 1.0f);
  v.c0 = uniform(static_cast<size_t>(dirs * c.batch * h), 1.0f);

  const Shape xShape =
      c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
  const Shape stateShape = c.layout == 0 ? Shape{dirs, c.batch, h} : Shape{c.batch, dirs, h};
  const Shape yShape =
      c.layout == 0 ? Shape{c.seq, dirs, c.batch, h} : Shape{c.batch, c.seq, dirs, h};
  auto m = makeModel(14);
  addInput(m, "X", xShape);
  if (c.constantWeights) {
    addFloatInitializer(m, "W", {dirs, n, c.input}, v.w);
    addFloatInitializer(m, "R", {dirs, n, h}, v.r);
  } else {
    addInput(m, "W", {dirs, n, c.input});
    addInput(m, "R", {dirs, n, h});
  }
  addInput(m, "B", {dirs, 2 * n});
  addInput(m, "lens", {c.batch}, onnx::TensorProto::INT32);
  addInput(m, "h0", stateShape);
  addInput(m, "c0", stateShape);
  addNode(m, "LSTM", {"X", "W", "R", "B", "lens", "h0", "c0"}, {"Y", "Y_h", "Y_c"}, "lstm");
  setInt(lastNode(m), "hidden_size", h);
  setInt(lastNode(m), "layout", c.layout);
  auto* direction = lastNode(m)->add_attribute();
  direction->set_name("direction");
  direction->set_type(onnx::AttributeProto::STRING);
  direction->set_s(c.direction);
  addOutput(m, "Y", yShape);
  addOutput(m, "Y_h", stateShape);
  addOutput(m, "Y_c", stateShape);

  std::vector<int32_t> lengths = c.lengths;
  if (lengths.empty()) lengths.assign(static_cast<size_t>(c.batch), static_cast<int32_t>(c.seq));
  std::vector<Tensor> inputs = {Tensor::fromVector(DataType::kFloat32, xShape, v.x)};
  if (!c.constantWeights) {
    inputs.push_back(Tensor::fromVector(DataType::kFloat32, {dirs, n, c.input}, v.w));
    inputs.push_back(Tensor::fromVector(DataType::kFloat32, {dirs, n, h}, v.r));
  }
  inputs.push_back(Tensor::fromVector(DataType::kFloat32, {dirs, 2 * n}, v.b));
  inputs.push_back(Tensor::fromVector(DataType::kInt32, {c.batch}, lengths));
  inputs.push_back(Tensor::fromVector(DataType::kFloat32, stateShape, v.h0));
  inputs.push_back(Tensor::fromVector(DataType::kFloat32, stateShape, v.c0));
  cpu::ThreadPool pool(c.threads);
  cpu::ThreadPoolScope scope(c.threads > 1 ? &pool : nullptr);
  const std::vector<Tensor> got = runGraph(loadInferredGraph(m, "lstm"), inputs);
  const std::vector<std::vector<float>> expected = referenceLstm(c, v);
  const std::vector<Shape> shapes = {yShape, stateShape, stateShape};
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k)
    expectClose(got[k], Tensor::fromVector(DataType::kFloat32, shapes[k], expected[k]), 2e-5f);
}

TEST(LstmKernel, MatchesADoublePrecisionLstmOnEveryLayoutAndDirection) {
  unsigned seed = 1;
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      checkLstm({1, 1, 3, 5, direction, layout, {}}, seed++);
      checkLstm({6, 3, 4, 17, direction, layout, {}}, seed++);
      checkLstm({5, 8, 7, 32, direction, layout, {}}, seed++);
    }
  }
}

TEST(LstmKernel, UnevenSequenceLengthsStopEachEntryAtItsOwnEnd) {
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    checkLstm({6, 4, 3, 9, direction, 0, {6, 1, 4, 0}}, 40);
    checkLstm({5, 3, 2, 16, direction, 1, {2, 5, 3}}, 41);
  }
}

// Initializer W and R: packed when the kernel is made, one batch entry (the matrix-vector
// product per step) and several; depths past one packed block (kc) and widths past one strip.
TEST(LstmKernel, ConstantWeightsPackedAtBuildMatchTheReference) {
  unsigned seed = 60;
  for (const char* direction : {"forward", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      checkLstm({4, 1, 300, 80, direction, layout, {}, true}, seed++);
      checkLstm({3, 5, 7, 33, direction, layout, {}, true}, seed++);
    }
  }
  checkLstm({6, 4, 3, 9, "reverse", 0, {6, 1, 4, 0}, true}, seed++);
}

// Two threads: a step's entries (each at least kMinElementsPerThread / (8 * hidden) of them per
// thread) in parallel, uneven lengths included, with and without packed weights.
TEST(LstmKernel, EntriesOfAStepInParallelMatchTheReference) {
  for (bool constant : {false, true}) {
    checkLstm({3, 17, 5, 256, "bidirectional", 0, {}, constant, 2}, 80);
    checkLstm({4, 9, 6, 512, "forward", 1, {4, 1, 3, 0, 4, 2, 4, 4, 1}, constant, 2}, 81);
  }
}

}  // namespace
}  // namespace kiln
