// The float32 GRU kernel (the batch's recurrent products in one SGEMM per step) against a naive
// double-precision GRU written from the ONNX definition: gates z, r, h; both linear_before_reset
// forms, every direction, uneven sequence lengths, initial state, Y and Y_h.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph_loading.h"
#include "graph_runner.h"
#include "model_builder.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;

struct GruCase {
  int64_t seq, batch, input, hidden;
  std::string direction;
  bool linearBeforeReset;
  std::vector<int32_t> lengths;  // empty: every sequence is seq long
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

void checkGru(const GruCase& c, unsigned seed) {
  SCOPED_TRACE("seq " + std::to_string(c.seq) + " batch " + std::to_string(c.batch) + " hidden " +
               std::to_string(c.hidden) + " " + c.direction + " linear_before_reset " +
               std::to_string(c.linearBeforeReset));
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, h = c.hidden, n = 3 * h;
  uint32_t stream = seed * 16;  // one seed per tensor
  auto uniform = [&](size_t n, float scale) {
    return randomFloats(static_cast<int64_t>(n), stream++, -scale, scale);
  };
  const auto x = uniform(static_cast<size_t>(c.seq * c.batch * c.input), 1.0f);
  const auto w = uniform(static_cast<size_t>(dirs * n * c.input), 0.5f);
  const auto r = uniform(static_cast<size_t>(dirs * n * h), 0.5f);
  const auto bias = uniform(static_cast<size_t>(dirs * 2 * n), 0.5f);
  const auto h0 = uniform(static_cast<size_t>(dirs * c.batch * h), 1.0f);
  std::vector<int32_t> lengths = c.lengths;
  if (lengths.empty()) lengths.assign(static_cast<size_t>(c.batch), static_cast<int32_t>(c.seq));

  // The reference, in double.
  std::vector<float> y(static_cast<size_t>(c.seq * dirs * c.batch * h), 0.0f);
  std::vector<float> yh(static_cast<size_t>(dirs * c.batch * h), 0.0f);
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = c.direction == "reverse" || d == 1;
    auto wAt = [&](int64_t k, int64_t i) {
      return double(w[static_cast<size_t>((d * n + k) * c.input + i)]);
    };
    auto rAt = [&](int64_t k, int64_t j) {
      return double(r[static_cast<size_t>((d * n + k) * h + j)]);
    };
    auto wb = [&](int64_t k) { return double(bias[static_cast<size_t>(d * 2 * n + k)]); };
    auto rb = [&](int64_t k) { return double(bias[static_cast<size_t>(d * 2 * n + n + k)]); };
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t len = lengths[static_cast<size_t>(b)];
      std::vector<double> hs(static_cast<size_t>(h));
      for (int64_t j = 0; j < h; ++j)
        hs[static_cast<size_t>(j)] = h0[static_cast<size_t>((d * c.batch + b) * h + j)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        const float* xt = &x[static_cast<size_t>((t * c.batch + b) * c.input)];
        auto xw = [&](int64_t k) {
          double acc = wb(k);
          for (int64_t i = 0; i < c.input; ++i) acc += xt[i] * wAt(k, i);
          return acc;
        };
        auto hr = [&](int64_t k, const std::vector<double>& v) {
          double acc = 0;
          for (int64_t j = 0; j < h; ++j) acc += v[static_cast<size_t>(j)] * rAt(k, j);
          return acc;
        };
        std::vector<double> z(static_cast<size_t>(h)), rg(static_cast<size_t>(h)),
            rh(static_cast<size_t>(h));
        for (int64_t j = 0; j < h; ++j) {
          z[static_cast<size_t>(j)] = sigmoid(xw(j) + hr(j, hs) + rb(j));
          rg[static_cast<size_t>(j)] = sigmoid(xw(h + j) + hr(h + j, hs) + rb(h + j));
          rh[static_cast<size_t>(j)] = rg[static_cast<size_t>(j)] * hs[static_cast<size_t>(j)];
        }
        std::vector<double> next(static_cast<size_t>(h));
        for (int64_t j = 0; j < h; ++j) {
          const int64_t k = 2 * h + j;
          const double candidate =
              c.linearBeforeReset
                  ? std::tanh(xw(k) + rg[static_cast<size_t>(j)] * (hr(k, hs) + rb(k)))
                  : std::tanh(xw(k) + hr(k, rh) + rb(k));
          next[static_cast<size_t>(j)] = (1 - z[static_cast<size_t>(j)]) * candidate +
                                         z[static_cast<size_t>(j)] * hs[static_cast<size_t>(j)];
        }
        hs = next;
        for (int64_t j = 0; j < h; ++j)
          y[static_cast<size_t>(((t * dirs + d) * c.batch + b) * h + j)] =
              static_cast<float>(hs[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < h; ++j)
        yh[static_cast<size_t>((d * c.batch + b) * h + j)] =
            len == 0 ? 0.0f : static_cast<float>(hs[static_cast<size_t>(j)]);
    }
  }

  auto m = makeModel(14);
  addInput(m, "X", {c.seq, c.batch, c.input});
  addInput(m, "W", {dirs, n, c.input});
  addInput(m, "R", {dirs, n, h});
  addInput(m, "B", {dirs, 2 * n});
  addInput(m, "lens", {c.batch}, onnx::TensorProto::INT32);
  addInput(m, "h0", {dirs, c.batch, h});
  addNode(m, "GRU", {"X", "W", "R", "B", "lens", "h0"}, {"Y", "Y_h"}, "gru");
  setInt(lastNode(m), "hidden_size", h);
  setInt(lastNode(m), "linear_before_reset", c.linearBeforeReset ? 1 : 0);
  auto* direction = lastNode(m)->add_attribute();
  direction->set_name("direction");
  direction->set_type(onnx::AttributeProto::STRING);
  direction->set_s(c.direction);
  addOutput(m, "Y", {c.seq, dirs, c.batch, h});
  addOutput(m, "Y_h", {dirs, c.batch, h});
  const std::vector<Tensor> got =
      runGraph(loadInferredGraph(m, "gru"),
               {Tensor::fromVector(DataType::kFloat32, {c.seq, c.batch, c.input}, x),
                Tensor::fromVector(DataType::kFloat32, {dirs, n, c.input}, w),
                Tensor::fromVector(DataType::kFloat32, {dirs, n, h}, r),
                Tensor::fromVector(DataType::kFloat32, {dirs, 2 * n}, bias),
                Tensor::fromVector(DataType::kInt32, {c.batch}, lengths),
                Tensor::fromVector(DataType::kFloat32, {dirs, c.batch, h}, h0)});
  ASSERT_EQ(got.size(), 2u);
  expectClose(got[0], Tensor::fromVector(DataType::kFloat32, {c.seq, dirs, c.batch, h}, y), 2e-5f);
  expectClose(got[1], Tensor::fromVector(DataType::kFloat32, {dirs, c.batch, h}, yh), 2e-5f);
}

TEST(GruKernel, MatchesADoublePrecisionGruInBothResetForms) {
  unsigned seed = 1;
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (bool linearBeforeReset : {false, true}) {
      checkGru({1, 1, 3, 5, direction, linearBeforeReset, {}}, seed++);
      checkGru({6, 5, 4, 17, direction, linearBeforeReset, {}}, seed++);
      checkGru({4, 8, 6, 32, direction, linearBeforeReset, {4, 1, 0, 3, 2, 4, 4, 1}}, seed++);
    }
  }
}

}  // namespace
}  // namespace kiln
