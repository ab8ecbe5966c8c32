// NchwcConv's X scale S (ir/ops/nchwc.h): the kernel (backends/cpu/kernels/nchwc_conv_scale.cpp)
// against a direct loop in double over X * S and against the kernel run on X * S computed first
// (the Mul it replaces), with scale padding lanes NaN; a session run and its error message; and the
// pass that folds a squeeze-excitation Mul into the 1x1 conv after it (src/opt/fold_se_scale.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "backends/cpu/kernels/nchwc_conv_scale.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "ir/node_attrs.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "nchwc_conv_reference.h"
#include "nchwc_test_layout.h"
#include "opt/passes.h"
#include "random_data.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ConvCase;
using kiln::testing::fromBlocked;
using kiln::testing::randomFloats;
using kiln::testing::reference;
using kiln::testing::shapeOf;
using kiln::testing::square;
using kiln::testing::toBlocked;

constexpr int64_t kB = 16;

// A square convolution whose X is scaled per channel (and per image unless sharedScale).
struct ScaleCase : ConvCase {
  bool sharedScale = false;  // S [1, Cb, 1, 1, 16] for every image

  int64_t scaleImages() const { return sharedScale ? 1 : n; }
};

ScaleCase scaleCase(std::string name, int64_t n, int64_t ci, int64_t co, int64_t h, int64_t w,
                    int64_t k = 1, int64_t stride = 1, int64_t pad = 0, bool sharedScale = false) {
  return ScaleCase{{square(std::move(name), n, ci, co, h, w, k, stride, pad)}, sharedScale};
}

// X * S over NCHW x, S [scaleImages, ci].
std::vector<float> scaledInput(const ScaleCase& t, const std::vector<float>& x,
                               const std::vector<float>& scale) {
  std::vector<float> xs(x.size());
  const int64_t plane = t.h * t.w;
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t c = 0; c < t.ci; ++c)
      for (int64_t p = 0; p < plane; ++p) {
        const size_t at = static_cast<size_t>((i * t.ci + c) * plane + p);
        xs[at] = x[at] * scale[static_cast<size_t>((t.sharedScale ? 0 : i) * t.ci + c)];
      }
  return xs;
}

void checkScaled(const ScaleCase& t, const Activation& act, bool withResidual) {
  SCOPED_TRACE(t.name + (withResidual ? " +residual" : "") + " act " + activationName(act.kind));
  const NchwcConvShape s = shapeOf(t);
  const int64_t inPlane = t.h * t.w, outPlane = s.outHeight * s.outWidth;
  const std::vector<float> x = randomFloats(t.n * t.ci * inPlane, 1),
                           w = randomFloats(t.co * t.ci * t.kh * t.kw, 2),
                           b = randomFloats(t.co, 3), z = randomFloats(t.n * t.co * outPlane, 4);
  const std::vector<float> scale =
      randomFloats(t.scaleImages() * t.ci, 5, 0.0f, 1.0f);  // a sigmoid gate
  const std::vector<float>* zp = withResidual ? &z : nullptr;
  const std::vector<float> xs = scaledInput(t, x, scale);
  const std::vector<float> expected = reference(t, xs, w, b, zp, act);

  const NchwcPackedWeights packed =
      packNchwcWeights(w.data(), t.co, t.ci, t.kh, t.kw, NchwcWeightLayout::kBlockedInput);
  std::vector<float> bias(static_cast<size_t>(s.outBlocks() * kB), 0.0f);
  std::copy(b.begin(), b.end(), bias.begin());
  const std::vector<float> xBlocked = toBlocked(x, t.n, t.ci, inPlane),
                           xsBlocked = toBlocked(xs, t.n, t.ci, inPlane);
  const std::vector<float> scaleBlocked =
      toBlocked(scale, t.scaleImages(), t.ci, 1);  // padding lanes NaN
  const std::vector<float> zBlocked = toBlocked(z, t.n, t.co, outPlane);
  const size_t yFloats = static_cast<size_t>(t.n * s.outBlocks() * outPlane * kB);
  std::vector<float> y(yFloats, 12345.0f), mulThenConv(yFloats, 12345.0f);
  NchwcConvArgs args;
  args.shape = &s;
  args.weights = packed.data.get();
  args.bias = bias.data();
  args.residual = withResidual ? zBlocked.data() : nullptr;
  args.act = act;
  args.x = xBlocked.data();
  args.y = y.data();
  nchwcConvScaledInput(args, scaleBlocked.data(), t.sharedScale ? 0 : s.inBlocks() * kB);
  args.x = xsBlocked.data();
  args.y = mulThenConv.data();
  nchwcConv(args);
  for (size_t i = 0; i < y.size(); ++i) {
    if (static_cast<int64_t>(i % kB) +
            static_cast<int64_t>(i) / (outPlane * kB) % s.outBlocks() * kB >=
        t.co) {
      ASSERT_TRUE(std::isfinite(y[i])) << "padding channel value " << y[i] << " at " << i;
    }
  }
  const std::vector<float> got = fromBlocked(y, t.n, t.co, outPlane);
  const std::vector<float> viaMul = fromBlocked(mulThenConv, t.n, t.co, outPlane);
  const float tolerance = std::sqrt(static_cast<float>(t.ci * t.kh * t.kw));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-4f * (tolerance + std::fabs(expected[i]))) << "at " << i;
    ASSERT_NEAR(got[i], viaMul[i], 1e-5f * (tolerance + std::fabs(viaMul[i])))
        << "Mul then conv, at " << i;
  }
}

class NchwcConvScale : public ::testing::TestWithParam<std::tuple<CpuIsa, int>> {};

TEST_P(NchwcConvScale, MatchesMulThenConv) {
  const auto [isa, threads] = GetParam();
  if (isa > detectedCpuIsa()) GTEST_SKIP() << "the CPU lacks " << cpuIsaName(isa);
  ScopedCpuIsaLimit limit(isa);
  kiln::testing::ScopedThreads scopedThreads(threads);
  const std::vector<ScaleCase> cases{
      scaleCase("SE projection 40 -> 24 at 9x7, 2 images", 2, 40, 24, 9, 7),
      scaleCase("one scale for 2 images, 72 -> 40", 2, 72, 40, 6, 11, 1, 1, 0, true),
      scaleCase("Co 144 (groups 3 + 3 + 3), Ci 100", 1, 100, 144, 13, 12),
      scaleCase("1x1 300 -> 80, slabs, 2 images", 2, 300, 80, 5, 7),
      scaleCase("3x3 s2 p1, Ci 20 -> 36, 2 images", 2, 20, 36, 9, 10, 3, 2, 1),
  };
  const std::vector<Activation> acts{
      {}, {ActivationKind::kRelu, 0, 0}, {ActivationKind::kSiLU, 0, 0}};
  for (const ScaleCase& t : cases) {
    for (const Activation& act : acts) {
      for (bool withResidual : {false, true}) checkScaled(t, act, withResidual);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsaAndThreads, NchwcConvScale,
                         ::testing::Combine(::testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx512),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(cpuIsaName(std::get<0>(info.param))) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

// X (blocked graph input) -> NchwcConv(X, W, B, no Z, S) with S a graph input of sShape.
std::string scaledConvModel(const std::string& name, const ScaleCase& t,
                            const std::vector<float>& w, const std::vector<float>& b,
                            const std::vector<int64_t>& sShape) {
  onnx::ModelProto model = kiln::testing::makeModel(13);
  auto* imp = model.add_opset_import();
  imp->set_domain("kiln");
  imp->set_version(1);
  const int64_t inBlocks = (t.ci + kB - 1) / kB;
  kiln::testing::addInput(model, "x", {t.n, inBlocks, t.h, t.w, kB});
  kiln::testing::addInput(model, "s", sShape);
  kiln::testing::addFloatInitializer(model, "w", {t.co, t.ci, 1, 1}, w);
  kiln::testing::addFloatInitializer(model, "b", {t.co}, b);
  kiln::testing::addNode(model, "NchwcConv", {"x", "w", "b", "", "s"}, {"y"}, "conv_" + name);
  auto* node = kiln::testing::lastNode(model);
  node->set_domain("kiln");
  kiln::testing::setInts(node, "kernel_shape", {1, 1});
  auto* out = model.mutable_graph()->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return kiln::testing::saveModel(model,
                                  kiln::testing::tempDir("nchwc_scale_" + name) / "model.onnx");
}

TEST(NchwcScaleNode, RunsThroughASessionWithAScalePerImage) {
  const ScaleCase t = scaleCase("session", 2, 40, 24, 6, 5);
  const std::vector<float> x = randomFloats(t.n * t.ci * t.h * t.w, 6),
                           w = randomFloats(t.co * t.ci, 7), b = randomFloats(t.co, 8),
                           scale = randomFloats(t.n * t.ci, 9, 0.0f, 1.0f);
  const std::vector<int64_t> sShape{t.n, 3, 1, 1, kB};
  Session session(scaledConvModel("session", t, w, b, sShape));
  const NamedTensors out =
      session.run({{"x", Tensor::fromVector<float>(DataType::kFloat32, {t.n, 3, t.h, t.w, kB},
                                                   toBlocked(x, t.n, t.ci, t.h * t.w))},
                   {"s", Tensor::fromVector<float>(DataType::kFloat32, sShape,
                                                   toBlocked(scale, t.n, t.ci, 1))}});
  const Tensor& y = out[0].second;
  ASSERT_EQ(y.shape(), (Shape{t.n, 2, t.h, t.w, kB}));
  const std::vector<float> got = fromBlocked(
      std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), t.n, t.co, t.h * t.w);
  const std::vector<float> expected =
      reference(t, scaledInput(t, x, scale), w, b, nullptr, Activation{});
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-4f * (7.0f + std::fabs(expected[i]))) << i;
}

TEST(NchwcScaleNode, RefusesAScaleThatIsNotPerChannel) {
  const ScaleCase t = scaleCase("bad_scale", 1, 40, 24, 6, 5);
  const std::vector<float> w = randomFloats(t.co * t.ci, 7), b = randomFloats(t.co, 8);
  try {
    Session session(scaledConvModel("bad_scale", t, w, b, {1, 3, t.h, 1, kB}));
    session.run({{"x", Tensor(DataType::kFloat32, {1, 3, t.h, t.w, kB})},
                 {"s", Tensor(DataType::kFloat32, {1, 3, t.h, 1, kB})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("X scale S"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("conv_bad_scale"));
  }
}

// ---- the pass: foldChannelScaleIntoNchwcConv, run by fuseLayers ----

using namespace kiln::testing;

void addConv(onnx::ModelProto& m, const std::string& name, const std::string& x,
             const std::string& y, int64_t ci, int64_t co, int64_t k) {
  addFloatInitializer(m, name + "_w", {co, ci, k, k},
                      randomFloats(co * ci * k * k, static_cast<uint32_t>(co * 7 + ci)));
  addFloatInitializer(m, name + "_b", {co}, randomFloats(co, static_cast<uint32_t>(co + 3)));
  addNode(m, "Conv", {x, name + "_w", name + "_b"}, {y}, name);
  setInts(lastNode(m), "kernel_shape", {k, k});
  setInts(lastNode(m), "pads", {k / 2, k / 2, k / 2, k / 2});
}

struct SeOptions {
  int64_t n = 2, channels = 40, size = 14, outChannels = 24;  // 8 * Co = 192 <= 196 pixels: folds
  bool gateFirst = false;      // Mul(gate, x) instead of Mul(x, gate)
  bool mulAlsoOutput = false;  // the Mul's result is a graph output as well
  bool residual = false;       // the projection adds the block input (EfficientNet's skip)
};

// EfficientNet's MBConv tail on input "in" [n, outChannels, size, size]: expand conv + SiLU -> x;
// GlobalAveragePool -> fc1 + SiLU -> fc2 + Sigmoid -> gate; Mul(x, gate) -> 1x1 projection -> y.
onnx::ModelProto seBlock(const SeOptions& o) {
  auto m = makeModel(13);
  const int64_t c = o.channels;
  addInput(m, "in", {o.n, o.outChannels, o.size, o.size});
  addConv(m, "expand", "in", "e", o.outChannels, c, 3);
  addNode(m, "Sigmoid", {"e"}, {"es"}, "expand_sigmoid");
  addNode(m, "Mul", {"e", "es"}, {"x"}, "expand_silu");
  addNode(m, "GlobalAveragePool", {"x"}, {"pooled"}, "squeeze");
  addConv(m, "fc1", "pooled", "f1", c, 10, 1);
  addNode(m, "Sigmoid", {"f1"}, {"f1s"}, "fc1_sigmoid");
  addNode(m, "Mul", {"f1", "f1s"}, {"f1a"}, "fc1_silu");
  addConv(m, "fc2", "f1a", "f2", 10, c, 1);
  addNode(m, "Sigmoid", {"f2"}, {"gate"}, "gate");
  addNode(
      m, "Mul",
      o.gateFirst ? std::vector<std::string>{"gate", "x"} : std::vector<std::string>{"x", "gate"},
      {"se"}, "excite");
  addConv(m, "project", "se", o.residual ? "p" : "y", c, o.outChannels, 1);
  if (o.residual) addNode(m, "Add", {"p", "in"}, {"y"}, "skip");
  addOutput(m, "y", {o.n, o.outChannels, o.size, o.size});
  if (o.mulAlsoOutput) addOutput(m, "se", {o.n, c, o.size, o.size});
  return m;
}

const ir::Node* nodeNamed(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

// The graph after fuseLayers, checked against the unfused graph on random inputs.
ir::Graph fuseAndCompare(const onnx::ModelProto& m, const std::string& tag,
                         float tolerance = 1e-4f) {
  const ir::Graph g = loadInferredGraph(m, "nchwc_se_fold_" + tag);
  ir::Graph fused = g;
  opt::foldConstants(fused);
  opt::fuseLayers(fused);
  ir::verifyGraph(fused);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Shape shape = *ir::concreteShape(*g.value(g.inputs[i]).type.shape);
    inputs.push_back(Tensor::fromVector(
        DataType::kFloat32, shape, randomFloats(shapeNumel(shape), 60 + static_cast<unsigned>(i))));
  }
  const std::vector<Tensor> before = runGraph(g, inputs), after = runGraph(fused, inputs);
  EXPECT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size() && i < after.size(); ++i)
    expectClose(after[i], before[i], tolerance);
  return fused;
}

// Whether the projection conv took the excite Mul as its X scale.
bool folded(const ir::Graph& g) {
  const ir::Node* project = nodeNamed(g, "project");
  EXPECT_NE(project, nullptr);
  if (!project) return false;
  EXPECT_EQ(project->opType, "NchwcConv");
  const bool hasScale = project->inputs.size() == 5 && project->inputs[4] != ir::kNoValue;
  const std::vector<std::string> from = opt::fusedFrom(*project);
  const bool recorded = std::find(from.begin(), from.end(), "excite") != from.end();
  EXPECT_EQ(hasScale, recorded);
  EXPECT_EQ(hasScale, nodeNamed(g, "excite") == nullptr);
  return hasScale;
}

TEST(NchwcSeFold, FoldsTheGateIntoAProjectionWithFarFewerOutputsThanPixels) {
  SeOptions o;  // 8 * Co 24 <= 14 * 14
  const ir::Graph g = fuseAndCompare(seBlock(o), "fold");
  ASSERT_TRUE(folded(g));
  const ir::Node& project = *nodeNamed(g, "project");
  EXPECT_EQ(ir::symShapeToString(*g.value(project.inputs[4]).type.shape), "2x3x1x1x16");
  EXPECT_EQ(ir::symShapeToString(*g.value(project.inputs[0]).type.shape), "2x3x14x14x16");
  for (const auto& n : g.nodes) EXPECT_NE(n.opType, "Mul") << n.name;
}

TEST(NchwcSeFold, FoldsEitherOperandOrderAndNextToAResidual) {
  SeOptions o;
  o.gateFirst = true;
  o.residual = true;
  const ir::Graph g = fuseAndCompare(seBlock(o), "order_residual");
  ASSERT_TRUE(folded(g));
  const ir::Node& project = *nodeNamed(g, "project");
  EXPECT_NE(project.inputs[3], ir::kNoValue);  // Z, the block input
  const std::vector<std::string> from = opt::fusedFrom(project);
  EXPECT_NE(std::find(from.begin(), from.end(), "skip"), from.end());
}

TEST(NchwcSeFold, KeepsTheMulWhenItsResultHasAnotherReader) {
  SeOptions o;
  o.mulAlsoOutput = true;
  EXPECT_FALSE(folded(fuseAndCompare(seBlock(o), "two_readers")));
}

TEST(NchwcSeFold, KeepsTheMulWhenScalingWeightsCostsMoreThanTheMap) {
  SeOptions o;
  o.size = 4;  // 16 pixels, Co 24: more outputs than pixels
  EXPECT_FALSE(folded(fuseAndCompare(seBlock(o), "co_above_pixels")));
  o.size = 8;  // 64 pixels, Co 24: fewer, but not 8 times fewer (EfficientNet's 14x14 stages)
  EXPECT_FALSE(folded(fuseAndCompare(seBlock(o), "co_below_pixels")));
  o.size = 14;  // 196 pixels: Co 25 just misses 8 * Co <= H * W, Co 24 just makes it
  o.outChannels = 25;
  EXPECT_FALSE(folded(fuseAndCompare(seBlock(o), "co_at_the_limit")));
  o.outChannels = 24;
  EXPECT_TRUE(folded(fuseAndCompare(seBlock(o), "co_within_the_limit")));
}

// Mul of two full maps, and Mul by one number: neither operand is a per-channel scale.
TEST(NchwcSeFold, KeepsAMulWhoseOperandIsNotPerChannel) {
  for (const bool scalar : {false, true}) {
    auto m = makeModel(13);
    addInput(m, "in", {2, 24, 14, 14});
    addConv(m, "a", "in", "xa", 24, 40, 3);
    if (scalar) {
      addFloatInitializer(m, "half", {}, {0.5f});
      addNode(m, "Mul", {"xa", "half"}, {"se"}, "excite");
    } else {
      addConv(m, "b", "in", "xb", 24, 40, 3);
      addNode(m, "Mul", {"xa", "xb"}, {"se"}, "excite");
    }
    addConv(m, "project", "se", "y", 40, 24, 1);
    addOutput(m, "y", {2, 24, 14, 14});
    // The product of two maps sums to values near 100 in the projection: 1e-4 of that as tolerance.
    const ir::Graph g = fuseAndCompare(m, scalar ? "scalar" : "two_maps", scalar ? 1e-4f : 1e-2f);
    EXPECT_FALSE(folded(g)) << (scalar ? "scalar" : "two maps");
    ASSERT_NE(nodeNamed(g, "excite"), nullptr);
    EXPECT_EQ(nodeNamed(g, "excite")->opType, "Mul");
  }
}

}  // namespace
}  // namespace kiln::cpu
