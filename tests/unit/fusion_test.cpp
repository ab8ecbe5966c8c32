// Fusion passes (src/opt): each test builds a small ONNX graph, checks what the pass made of it,
// and runs the graph before and after on the same inputs; depthwise convolutions are also
// checked against a direct loop, since the fused and unfused graphs share that kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/kernels/conv_winograd.h"
#include "engine/executor.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "guarded_workspace.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "model_builder.h"
#include "onnx/loader.h"
#include "opt/passes.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;

void addRandomInitializer(onnx::ModelProto& m, const std::string& name,
                          const std::vector<int64_t>& dims, unsigned seed, float lo = -1.0f,
                          float hi = 1.0f) {
  addFloatInitializer(m, name, dims, randomFloats(shapeNumel(dims), seed, lo, hi));
}

ir::Graph loadGraph(const onnx::ModelProto& m, const std::string& tag) {
  return loadInferredGraph(m, "fusion_" + tag);
}

// Fuses a copy of g with every pass and checks it computes what g does on random inputs.
ir::Graph fuseAndCompare(const ir::Graph& g, const std::vector<Shape>& inputShapes,
                         float tolerance = 1e-5f) {
  ir::Graph fused = g;
  opt::fuseLayers(fused);
  ir::verifyGraph(fused);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < inputShapes.size(); ++i) {
    inputs.push_back(Tensor::fromVector(DataType::kFloat32, inputShapes[i],
                                        randomFloats(shapeNumel(inputShapes[i]), 100 + i)));
  }
  std::vector<Tensor> before = runGraph(g, inputs), after = runGraph(fused, inputs);
  EXPECT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size() && i < after.size(); ++i)
    expectClose(after[i], before[i], tolerance);
  return fused;
}

std::vector<std::string> opTypes(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  return ops;
}

using Strings = std::vector<std::string>;

TEST(ConvFusion, BatchNormFoldsAndReluFuses) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 8, 8});
  addRandomInitializer(m, "W", {4, 3, 3, 3}, 1);
  addRandomInitializer(m, "B", {4}, 2);
  addRandomInitializer(m, "scale", {4}, 3, 0.5f, 2.0f);
  addRandomInitializer(m, "shift", {4}, 4);
  addRandomInitializer(m, "mean", {4}, 5);
  addRandomInitializer(m, "var", {4}, 6, 0.1f, 2.0f);
  addNode(m, "Conv", {"x", "W", "B"}, {"c"}, "conv");
  setInts(lastNode(m), "pads", {1, 1, 1, 1});
  addNode(m, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"}, "bn");
  setFloat(lastNode(m), "epsilon", 1e-3f);
  addNode(m, "Relu", {"bn"}, {"y"}, "relu");
  addOutput(m, "y", {1, 4, 8, 8});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "bn"), {{1, 3, 8, 8}});
  ASSERT_EQ(opTypes(fused), Strings{"FusedConv"});
  EXPECT_EQ(fused.nodes[0].domain, "kiln");
  EXPECT_EQ(ir::attrString(fused.nodes[0], "activation"), "Relu");
  EXPECT_EQ(opt::fusedFrom(fused.nodes[0]), (Strings{"conv", "bn", "relu"}));
}

// A Conv dilated by `dilation` with pads `pads` on a [1, 4, h, w] map, after every pass (checked
// against the graph before them): the fused conv's weight shape, dilations and pads.
struct TrimmedConv {
  Shape weight;
  std::vector<int64_t> dilations, pads;
};
TrimmedConv fuseDilatedConv(int64_t h, int64_t w, std::vector<int64_t> dilations,
                            std::vector<int64_t> pads, const std::string& tag) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 4, h, w});
  addRandomInitializer(m, "W", {8, 4, 3, 3}, 1);
  addRandomInitializer(m, "B", {8}, 2);
  addNode(m, "Conv", {"x", "W", "B"}, {"y"}, "conv");
  setInts(lastNode(m), "dilations", dilations);
  setInts(lastNode(m), "pads", pads);
  const int64_t oh = h + pads[0] + pads[2] - 2 * dilations[0],
                ow = w + pads[1] + pads[3] - 2 * dilations[1];
  addOutput(m, "y", {1, 8, oh, ow});
  ir::Graph fused = fuseAndCompare(loadGraph(m, tag), {{1, 4, h, w}});
  EXPECT_EQ(opTypes(fused), Strings{"Conv"});
  const ir::Node& conv = fused.nodes.at(0);
  return {fused.value(conv.inputs[1]).constant->shape(), ir::attrInts(conv, "dilations"),
          ir::attrInts(conv, "pads")};
}

TEST(ConvFusion, TapsThatOnlyReadPaddingAreDropped) {
  // DeepLabV3's ASPP: dilation 24 on a 14x14 map, so only the centre tap ever reads the map.
  TrimmedConv aspp = fuseDilatedConv(14, 14, {24, 24}, {24, 24, 24, 24}, "aspp");
  EXPECT_EQ(aspp.weight, (Shape{8, 4, 1, 1}));
  EXPECT_EQ(aspp.dilations, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(aspp.pads, (std::vector<int64_t>{0, 0, 0, 0}));
  // Padding only after: the last tap row and column fall beyond the map, the pads shrink by 2.
  TrimmedConv after = fuseDilatedConv(3, 5, {2, 2}, {0, 0, 4, 4}, "pad_after");
  EXPECT_EQ(after.weight, (Shape{8, 4, 2, 3}));  // on 5 columns the last tap reads column 4
  EXPECT_EQ(after.pads, (std::vector<int64_t>{0, 0, 2, 4}));
  // Dilation 12 on 14x14: the outer taps read the map's edge rows and columns, so all stay.
  TrimmedConv kept = fuseDilatedConv(14, 14, {12, 12}, {12, 12, 12, 12}, "kept");
  EXPECT_EQ(kept.weight, (Shape{8, 4, 3, 3}));
  EXPECT_EQ(kept.pads, (std::vector<int64_t>{12, 12, 12, 12}));
}

TEST(ConvFusion, ResidualAddThenReluFuses) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 4, 6, 6});
  addRandomInitializer(m, "W", {4, 4, 1, 1}, 1);
  addRandomInitializer(m, "B", {4}, 2);
  addNode(m, "Conv", {"x", "W", "B"}, {"c"}, "conv");
  addNode(m, "Add", {"x", "c"}, {"s"}, "add");
  addNode(m, "Relu", {"s"}, {"y"}, "relu");
  addOutput(m, "y", {1, 4, 6, 6});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "residual"), {{1, 4, 6, 6}});
  ASSERT_EQ(opTypes(fused), Strings{"FusedConv"});
  ASSERT_EQ(fused.nodes[0].inputs.size(), 4u);
  EXPECT_EQ(fused.value(fused.nodes[0].inputs[3]).name, "x");
  EXPECT_EQ(opt::fusedFrom(fused.nodes[0]), (Strings{"conv", "add", "relu"}));
}

TEST(ConvFusion, EachActivationMatchesTheUnfusedOp) {
  struct Case {
    const char* op;
    std::vector<std::pair<const char*, float>> attrs;
  };
  for (const Case& c : std::vector<Case>{{"LeakyRelu", {{"alpha", 0.1f}}},
                                         {"HardSigmoid", {{"alpha", 0.3f}, {"beta", 0.4f}}},
                                         {"HardSwish", {}},
                                         {"Sigmoid", {}}}) {
    SCOPED_TRACE(c.op);
    auto m = makeModel(14);
    addInput(m, "x", {1, 3, 7, 5});
    addRandomInitializer(m, "W", {5, 3, 3, 3}, 7, -2.0f, 2.0f);
    addNode(m, "Conv", {"x", "W"}, {"c"}, "conv");
    setInts(lastNode(m), "pads", {1, 0, 1, 0});
    addNode(m, c.op, {"c"}, {"y"}, "act");
    for (auto [name, value] : c.attrs) setFloat(lastNode(m), name, value);
    addOutput(m, "y", {1, 5, 7, 3});
    ir::Graph fused = fuseAndCompare(loadGraph(m, c.op), {{1, 3, 7, 5}});
    ASSERT_EQ(opTypes(fused), Strings{"FusedConv"});
    EXPECT_EQ(ir::attrString(fused.nodes[0], "activation"), c.op);
  }
}

TEST(ConvFusion, ConvReadTwiceKeepsItsActivationSeparate) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 2, 4, 4});
  addRandomInitializer(m, "W", {2, 2, 1, 1}, 1);
  addNode(m, "Conv", {"x", "W"}, {"c"}, "conv");
  addNode(m, "Relu", {"c"}, {"y"}, "relu");
  addNode(m, "Neg", {"c"}, {"z"}, "neg");
  addOutput(m, "y", {1, 2, 4, 4});
  addOutput(m, "z", {1, 2, 4, 4});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "twice"), {{1, 2, 4, 4}});
  EXPECT_EQ(opTypes(fused), (Strings{"Conv", "Relu", "Neg"}));
}

// Direct depthwise convolution: the reference the specialised kernel is checked against.
std::vector<float> depthwiseReference(const std::vector<float>& x, const std::vector<float>& w,
                                      const std::vector<float>& b, int64_t n, int64_t c, int64_t h,
                                      int64_t wd, int64_t k, int64_t s, int64_t pad, int64_t oh,
                                      int64_t ow) {
  std::vector<float> y(static_cast<size_t>(n * c * oh * ow));
  for (int64_t img = 0; img < n * c; ++img) {
    const int64_t ch = img % c;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = b[ch];
        for (int64_t ky = 0; ky < k; ++ky) {
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t iy = oy * s - pad + ky, ix = ox * s - pad + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
            acc += double(x[(img * h + iy) * wd + ix]) * w[(ch * k + ky) * k + kx];
          }
        }
        y[(img * oh + oy) * ow + ox] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

TEST(ConvFusion, DepthwiseKernelsMatchADirectLoop) {
  struct Case {
    int64_t k, s, pad, n, c, h, w;
  };
  for (const Case& t : std::vector<Case>{{3, 1, 1, 1, 8, 9, 9},
                                         {3, 2, 1, 2, 5, 10, 13},
                                         {5, 1, 2, 1, 6, 11, 17},
                                         {5, 2, 2, 1, 3, 15, 8},
                                         {7, 1, 3, 1, 2, 7, 23},
                                         {3, 2, 0, 1, 4, 6, 7}}) {
    SCOPED_TRACE("k=" + std::to_string(t.k) + " s=" + std::to_string(t.s) +
                 " w=" + std::to_string(t.w));
    const int64_t oh = (t.h + 2 * t.pad - t.k) / t.s + 1, ow = (t.w + 2 * t.pad - t.k) / t.s + 1;
    auto m = makeModel(13);
    addInput(m, "x", {t.n, t.c, t.h, t.w});
    std::vector<float> w = randomFloats(t.c * t.k * t.k, 1), b = randomFloats(t.c, 2);
    addFloatInitializer(m, "W", {t.c, 1, t.k, t.k}, w);
    addFloatInitializer(m, "B", {t.c}, b);
    addNode(m, "Conv", {"x", "W", "B"}, {"c"}, "dw");
    setInt(lastNode(m), "group", t.c);
    setInts(lastNode(m), "strides", {t.s, t.s});
    setInts(lastNode(m), "pads", {t.pad, t.pad, t.pad, t.pad});
    addOutput(m, "c", {t.n, t.c, oh, ow});
    ir::Graph g = loadGraph(m, "dw");
    std::vector<float> x = randomFloats(t.n * t.c * t.h * t.w, 3);
    std::vector<Tensor> out =
        runGraph(g, {Tensor::fromVector(DataType::kFloat32, {t.n, t.c, t.h, t.w}, x)});
    Tensor expected = Tensor::fromVector(
        DataType::kFloat32, {t.n, t.c, oh, ow},
        depthwiseReference(x, w, b, t.n, t.c, t.h, t.w, t.k, t.s, t.pad, oh, ow));
    expectClose(out[0], expected, 1e-5f);
  }
}

TEST(ConvFusion, DepthwiseWithClipAndSiLUPatterns) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 6, 11, 13});
  addRandomInitializer(m, "W1", {6, 1, 3, 3}, 1);
  addRandomInitializer(m, "W2", {6, 1, 5, 5}, 2);
  addFloatInitializer(m, "lo", {}, {0.0f});
  addFloatInitializer(m, "hi", {}, {0.5f});
  addNode(m, "Conv", {"x", "W1"}, {"c1"}, "dw1");
  setInt(lastNode(m), "group", 6);
  setInts(lastNode(m), "strides", {2, 2});
  setInts(lastNode(m), "pads", {1, 1, 1, 1});
  addNode(m, "Clip", {"c1", "lo", "hi"}, {"r"}, "clip");
  addNode(m, "Conv", {"r", "W2"}, {"c2"}, "dw2");
  setInt(lastNode(m), "group", 6);
  setInts(lastNode(m), "pads", {2, 2, 2, 2});
  addNode(m, "Sigmoid", {"c2"}, {"sig"}, "sigmoid");
  addNode(m, "Mul", {"c2", "sig"}, {"y"}, "mul");
  addOutput(m, "y", {2, 6, 6, 7});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "dwact"), {{2, 6, 11, 13}});
  ASSERT_EQ(opTypes(fused), (Strings{"FusedConv", "FusedConv"}));
  EXPECT_EQ(ir::attrString(fused.nodes[0], "activation"), "Clip");
  EXPECT_EQ(ir::attrFloats(fused.nodes[0], "activation_params"), (std::vector<float>{0.0f, 0.5f}));
  EXPECT_EQ(ir::attrString(fused.nodes[1], "activation"), "SiLU");
  EXPECT_EQ(opt::fusedFrom(fused.nodes[1]), (Strings{"dw2", "sigmoid", "mul"}));
}

// nn.Hardswish as torch exports it before opset 14: x * HardSigmoid(x; alpha 1/6, beta 1/2). With
// another alpha the HardSigmoid is not hard-swish's and stays a separate node.
TEST(ConvFusion, HardSigmoidTimesItsInputFusesAsHardSwish) {
  for (const float alpha : {1.0f / 6.0f, 0.2f}) {
    auto m = makeModel(13);
    addInput(m, "x", {1, 4, 9, 9});
    addRandomInitializer(m, "W", {8, 4, 3, 3}, 3);
    addNode(m, "Conv", {"x", "W"}, {"c"}, "conv");
    setInts(lastNode(m), "pads", {1, 1, 1, 1});
    addNode(m, "HardSigmoid", {"c"}, {"hs"}, "hardsigmoid");
    setFloat(lastNode(m), "alpha", alpha);
    addNode(m, "Mul", {"c", "hs"}, {"y"}, "mul");
    addOutput(m, "y", {1, 8, 9, 9});
    ir::Graph fused = fuseAndCompare(loadGraph(m, "hardswish"), {{1, 4, 9, 9}});
    if (alpha == 0.2f) {
      EXPECT_EQ(opTypes(fused), (Strings{"Conv", "HardSigmoid", "Mul"}));
      continue;
    }
    ASSERT_EQ(opTypes(fused), (Strings{"FusedConv"}));
    EXPECT_EQ(ir::attrString(fused.nodes[0], "activation"), "HardSwish");
    EXPECT_EQ(opt::fusedFrom(fused.nodes[0]), (Strings{"conv", "hardsigmoid", "mul"}));
  }
}

// Direct ungrouped 2-D convolution in double: the reference for the Winograd path.
std::vector<float> convReference(const std::vector<float>& x, const std::vector<float>& w,
                                 int64_t c, int64_t h, int64_t wd, int64_t oc, int64_t pad,
                                 int64_t oh, int64_t ow) {
  std::vector<float> y(static_cast<size_t>(oc * oh * ow));
  for (int64_t o = 0; o < oc; ++o) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double acc = 0;
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy - pad + ky, ix = ox - pad + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
              acc += double(x[(ci * h + iy) * wd + ix]) * w[((o * c + ci) * 3 + ky) * 3 + kx];
            }
          }
        }
        y[(o * oh + oy) * ow + ox] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

// 3x3 stride-1 convolutions, through the Conv kernel (im2col + GEMM at these channel counts) and
// straight through the Winograd kernel (odd sizes: partial tiles).
TEST(ConvKernels, Winograd3x3MatchesADirectLoop) {
  struct Case {
    int64_t c, oc, h, w, pad;
  };
  for (const Case& t :
       std::vector<Case>{{16, 16, 9, 11, 1}, {24, 40, 8, 8, 1}, {32, 17, 13, 7, 0}}) {
    SCOPED_TRACE("c=" + std::to_string(t.c) + " h=" + std::to_string(t.h));
    const int64_t oh = t.h + 2 * t.pad - 2, ow = t.w + 2 * t.pad - 2;
    auto m = makeModel(13);
    addInput(m, "x", {1, t.c, t.h, t.w});
    std::vector<float> w = randomFloats(t.oc * t.c * 9, 1);
    addFloatInitializer(m, "W", {t.oc, t.c, 3, 3}, w);
    addNode(m, "Conv", {"x", "W"}, {"y"}, "conv");
    setInts(lastNode(m), "pads", {t.pad, t.pad, t.pad, t.pad});
    addOutput(m, "y", {1, t.oc, oh, ow});
    ir::Graph g = loadGraph(m, "winograd");
    std::vector<float> x = randomFloats(t.c * t.h * t.w, 3);
    std::vector<Tensor> out =
        runGraph(g, {Tensor::fromVector(DataType::kFloat32, {1, t.c, t.h, t.w}, x)});
    Tensor expected = Tensor::fromVector(DataType::kFloat32, {1, t.oc, oh, ow},
                                         convReference(x, w, t.c, t.h, t.w, t.oc, t.pad, oh, ow));
    expectClose(out[0], expected, 1e-4f);
    ir::ConvGeometry geometry;
    geometry.kernel = {3, 3};
    geometry.strides = geometry.dilations = {1, 1};
    geometry.padsBegin = geometry.padsEnd = {t.pad, t.pad};
    geometry.outputPadding = {0, 0};
    geometry.output = {oh, ow};
    Tensor winograd = Tensor::fromVector(DataType::kFloat32, {1, t.oc, oh, ow},
                                         std::vector<float>(t.oc * oh * ow));
    const kiln::testing::GuardedWorkspace ws(
        cpu::winogradWorkspaceBytes(geometry, t.c, t.oc, cpu::activeCpuIsa(), cpu::poolThreads()));
    cpu::winogradConv2d(geometry, 1, t.c, t.h, t.w, t.oc, x.data(),
                        cpu::packWinogradFilters(w.data(), t.oc, t.c), winograd.data<float>(),
                        ws.data());
    EXPECT_TRUE(ws.intact()) << "wrote past winogradWorkspaceBytes";
    expectClose(winograd, expected, 1e-4f);
  }
}

// Winograd with bias, residual and Relu fused (applied to each run of finished output rows): 256
// channels make tile blocks of 64 tiles, so the 9x9 tiles of this image end a block mid tile-row.
TEST(ConvKernels, WinogradFusedBiasResidualReluAcrossTileBlocks) {
  const int64_t c = 256, h = 18, w = 17;
  auto m = makeModel(13);
  addInput(m, "x", {1, c, h, w});
  std::vector<float> weights = randomFloats(c * c * 9, 5), bias = randomFloats(c, 6);
  addFloatInitializer(m, "W", {c, c, 3, 3}, weights);
  addFloatInitializer(m, "B", {c}, bias);
  addNode(m, "Conv", {"x", "W", "B"}, {"conv_out"}, "conv");
  setInts(lastNode(m), "pads", {1, 1, 1, 1});
  addNode(m, "Add", {"conv_out", "x"}, {"s"}, "add");
  addNode(m, "Relu", {"s"}, {"y"}, "relu");
  addOutput(m, "y", {1, c, h, w});
  ir::Graph g = loadGraph(m, "winograd_epilogue");
  opt::fuseLayers(
      g, opt::FusionOptions{/*nchwcLayout=*/false});  // keep the plain FusedConv (Winograd) kernel
  ASSERT_EQ(opTypes(g), Strings{"FusedConv"});
  std::vector<float> x = randomFloats(c * h * w, 7);
  std::vector<Tensor> out = runGraph(g, {Tensor::fromVector(DataType::kFloat32, {1, c, h, w}, x)});
  std::vector<float> expected = convReference(x, weights, c, h, w, c, 1, h, w);
  for (int64_t o = 0; o < c; ++o) {
    for (int64_t i = 0; i < h * w; ++i) {
      float& e = expected[o * h * w + i];
      e = std::max(0.0f, e + bias[o] + x[o * h * w + i]);
    }
  }
  expectClose(out[0], Tensor::fromVector(DataType::kFloat32, {1, c, h, w}, expected), 1e-4f);
}

// Linear + GELU as torch 1.13 exports it, then Linear + residual.
TEST(MatMulFusion, BiasGeluAndBiasResidual) {
  auto m = makeModel(14);
  addInput(m, "a", {2, 5, 8});
  addRandomInitializer(m, "W1", {8, 16}, 1);
  addRandomInitializer(m, "b1", {16}, 2);
  addRandomInitializer(m, "W2", {16, 8}, 3);
  addRandomInitializer(m, "b2", {8}, 4);
  addFloatInitializer(m, "sqrt2", {}, {1.4142135f});
  addFloatInitializer(m, "one", {}, {1.0f});
  addFloatInitializer(m, "half", {}, {0.5f});
  addNode(m, "MatMul", {"a", "W1"}, {"m1"}, "up");
  addNode(m, "Add", {"b1", "m1"}, {"h"}, "up_bias");
  addNode(m, "Div", {"h", "sqrt2"}, {"d"}, "div");
  addNode(m, "Erf", {"d"}, {"e"}, "erf");
  addNode(m, "Add", {"e", "one"}, {"e1"}, "add1");
  addNode(m, "Mul", {"h", "e1"}, {"p"}, "mul");
  addNode(m, "Mul", {"p", "half"}, {"g"}, "mul_half");
  addNode(m, "MatMul", {"g", "W2"}, {"m2"}, "down");
  addNode(m, "Add", {"b2", "m2"}, {"o"}, "down_bias");
  addNode(m, "Add", {"a", "o"}, {"y"}, "residual");
  addOutput(m, "y", {2, 5, 8});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "gelu"), {{2, 5, 8}});
  ASSERT_EQ(opTypes(fused), (Strings{"FusedMatMul", "FusedMatMul"}));
  EXPECT_EQ(ir::attrString(fused.nodes[0], "activation"), "Gelu");
  EXPECT_EQ(opt::fusedFrom(fused.nodes[0]),
            (Strings{"up", "up_bias", "div", "erf", "add1", "mul", "mul_half"}));
  EXPECT_EQ(fused.nodes[1].inputs.size(), 4u);
  EXPECT_EQ(opt::fusedFrom(fused.nodes[1]), (Strings{"down", "down_bias", "residual"}));
}

TEST(LayerNormFusion, TorchPatternBecomesLayerNormalization) {
  auto m = makeModel(14);
  addInput(m, "x", {2, 3, 16});
  addRandomInitializer(m, "gamma", {16}, 1);
  addRandomInitializer(m, "beta", {16}, 2);
  addFloatInitializer(m, "two", {}, {2.0f});
  addFloatInitializer(m, "eps", {}, {1e-5f});
  addNode(m, "ReduceMean", {"x"}, {"mean"}, "mean");
  setInts(lastNode(m), "axes", {-1});
  addNode(m, "Sub", {"x", "mean"}, {"d"}, "sub");
  addNode(m, "Pow", {"d", "two"}, {"sq"}, "pow");
  addNode(m, "ReduceMean", {"sq"}, {"var"}, "var");
  setInts(lastNode(m), "axes", {-1});
  addNode(m, "Add", {"var", "eps"}, {"ve"}, "add_eps");
  addNode(m, "Sqrt", {"ve"}, {"sd"}, "sqrt");
  addNode(m, "Div", {"d", "sd"}, {"n"}, "div");
  addNode(m, "Mul", {"n", "gamma"}, {"s"}, "mul");
  addNode(m, "Add", {"s", "beta"}, {"y"}, "add");
  addOutput(m, "y", {2, 3, 16});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "ln"), {{2, 3, 16}});
  ASSERT_EQ(opTypes(fused), Strings{"LayerNormalization"});
  EXPECT_FLOAT_EQ(ir::attrFloat(fused.nodes[0], "epsilon"), 1e-5f);
  EXPECT_EQ(opt::fusedFrom(fused.nodes[0]).size(), 9u);
}

TEST(LayoutCancellation, InverseTransposesVanishAndOthersCompose) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 3, 4, 5});
  addNode(m, "Transpose", {"x"}, {"t1"}, "t1");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Transpose", {"t1"}, {"t2"}, "t2");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Relu", {"t2"}, {"r"}, "relu");
  addNode(m, "Transpose", {"r"}, {"t3"}, "t3");
  setInts(lastNode(m), "perm", {0, 2, 3, 1});
  addNode(m, "Transpose", {"t3"}, {"y"}, "t4");
  setInts(lastNode(m), "perm", {1, 0, 3, 2});
  addOutput(m, "y", {4, 2, 3, 5});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "transpose"), {{2, 3, 4, 5}});
  ASSERT_EQ(opTypes(fused), (Strings{"Relu", "Transpose"}));
  EXPECT_EQ(fused.value(fused.nodes[0].inputs[0]).name, "x");
  EXPECT_EQ(ir::attrInts(fused.nodes[1], "perm"), (std::vector<int64_t>{2, 0, 1, 3}));
}

TEST(LayoutCancellation, ReshapeChainsCollapse) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 3, 4});
  addInt64Initializer(m, "s1", {6, 4});
  addInt64Initializer(m, "s2", {3, -1});
  addNode(m, "Reshape", {"x", "s1"}, {"r1"}, "r1");
  addNode(m, "Reshape", {"r1", "s2"}, {"y"}, "r2");
  addOutput(m, "y", {3, 8});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "reshape"), {{2, 3, 4}});
  ASSERT_EQ(opTypes(fused), Strings{"Reshape"});
  EXPECT_EQ(fused.value(fused.nodes[0].inputs[0]).name, "x");
}

TEST(CommonSubexpressions, DuplicateNodesMerge) {
  auto m = makeModel(13);
  addInput(m, "x", {3, 4});
  addNode(m, "Sigmoid", {"x"}, {"a"}, "s1");
  addNode(m, "Sigmoid", {"x"}, {"b"}, "s2");
  addNode(m, "Softmax", {"a"}, {"c"}, "soft1");
  setInt(lastNode(m), "axis", 0);
  addNode(m, "Softmax", {"b"}, {"d"}, "soft2");
  setInt(lastNode(m), "axis", 1);  // differs: stays
  addNode(m, "Add", {"c", "d"}, {"y"}, "add");
  addOutput(m, "y", {3, 4});
  ir::Graph fused = fuseAndCompare(loadGraph(m, "cse"), {{3, 4}});
  EXPECT_EQ(opTypes(fused), (Strings{"Sigmoid", "Softmax", "Softmax", "Add"}));
  EXPECT_EQ(opt::fusedFrom(fused.nodes[0]), (Strings{"s1", "s2"}));
}

}  // namespace
}  // namespace kiln
