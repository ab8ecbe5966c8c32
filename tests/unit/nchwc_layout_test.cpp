// The NCHWc layout pass (src/opt/nchwc_layout.cpp) and the blocked pooling kernels
// (backends/cpu/kernels/nchwc_pool.cpp). Structural tests build small ONNX graphs and check which
// nodes run blocked and where the reorders go; numeric tests run the graph before and after the
// pass (which needs the kiln::NchwcConv kernel) and the blocked pools against MaxPool/AveragePool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "backends/cpu/kernel.h"
#include "engine/executor.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "ir/ops/nchwc_groups.h"
#include "model_builder.h"
#include "onnx/loader.h"
#include "opt/nchwc_rules.h"
#include "opt/passes.h"
#include "random_data.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using Strings = std::vector<std::string>;

// A Conv node `name` reading x, with random constant weights name_w [co, ci / group, k, k] and
// bias.
void addConv(onnx::ModelProto& m, const std::string& name, const std::string& x,
             const std::string& y, int64_t ci, int64_t co, int64_t k = 3, int64_t group = 1) {
  const std::vector<int64_t> w = {co, ci / group, k, k};
  addFloatInitializer(m, name + "_w", w,
                      randomFloats(shapeNumel(w), static_cast<unsigned>(name.size() * 31 + co)));
  addFloatInitializer(m, name + "_b", {co}, randomFloats(co, static_cast<unsigned>(co + 7)));
  addNode(m, "Conv", {x, name + "_w", name + "_b"}, {y}, name);
  setInts(lastNode(m), "kernel_shape", {k, k});
  setInts(lastNode(m), "pads", {k / 2, k / 2, k / 2, k / 2});
  if (group != 1) setInt(lastNode(m), "group", group);
}

ir::Graph loadGraph(const onnx::ModelProto& m, const std::string& tag) {
  return loadInferredGraph(m, "nchwc_layout_" + tag);
}

// The graph after the layout pass alone (no other fusion), verified.
ir::Graph converted(const onnx::ModelProto& m, const std::string& tag, int* count = nullptr) {
  ir::Graph g = loadGraph(m, tag);
  const int n = opt::convertToNchwcLayout(g);
  if (count) *count = n;
  ir::verifyGraph(g);
  return g;
}

Strings opTypes(const ir::Graph& g) {
  Strings ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  return ops;
}

int countOp(const ir::Graph& g, const std::string& op) {
  const Strings ops = opTypes(g);
  return static_cast<int>(std::count(ops.begin(), ops.end(), op));
}

const ir::Node& nodeNamed(const ir::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node " + name);
}

const ir::Node& producerOf(const ir::Graph& g, int value) {
  return g.nodes.at(static_cast<size_t>(g.value(value).producer));
}

std::string shapeOf(const ir::Graph& g, int value) {
  return ir::symShapeToString(*g.value(value).type.shape);
}

// Runs the graph as loaded and after fuseLayers (with the layout pass) on the same random inputs.
ir::Graph fuseAndCompare(const onnx::ModelProto& m, const std::string& tag,
                         const std::vector<Shape>& shapes) {
  const ir::Graph g = loadGraph(m, tag);
  ir::Graph fused = g;
  opt::foldConstants(fused);
  opt::fuseLayers(fused);
  ir::verifyGraph(fused);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(
        Tensor::fromVector(DataType::kFloat32, shapes[i],
                           randomFloats(shapeNumel(shapes[i]), 50 + static_cast<unsigned>(i))));
  }
  const std::vector<Tensor> before = runGraph(g, inputs), after = runGraph(fused, inputs);
  EXPECT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size() && i < after.size(); ++i)
    expectClose(after[i], before[i], 1e-4f);
  return fused;
}

// x [1, 16, 8, 8] -> conv1 (32) -> relu -> conv2 (32) -> add(relu) -> conv3 (32) -> y.
onnx::ModelProto residualChain() {
  auto m = makeModel(13);
  addInput(m, "x", {1, 16, 8, 8});
  addConv(m, "conv1", "x", "c1", 16, 32);
  addNode(m, "Relu", {"c1"}, {"r1"}, "relu1");
  addConv(m, "conv2", "r1", "c2", 32, 32);
  addNode(m, "Add", {"c2", "r1"}, {"sum"}, "add");
  addConv(m, "conv3", "sum", "y", 32, 32, 1);
  addOutput(m, "y", {1, 32, 8, 8});
  return m;
}

TEST(NchwcLayout, AChainReordersOnceAtEachEnd) {
  int count = 0;
  ir::Graph g = converted(residualChain(), "chain", &count);
  EXPECT_EQ(opTypes(g), (Strings{"ReorderToNchwc", "NchwcConv", "Relu", "NchwcConv", "Add",
                                 "NchwcConv", "ReorderFromNchwc"}));
  EXPECT_EQ(count, 5);
  // Converted nodes keep their names; the graph output keeps its name and NCHW shape.
  EXPECT_EQ(nodeNamed(g, "conv2").domain, "kiln");
  EXPECT_EQ(nodeNamed(g, "relu1").inputs[0], nodeNamed(g, "conv1").outputs[0]);
  EXPECT_EQ(shapeOf(g, nodeNamed(g, "relu1").outputs[0]), "1x2x8x8x16");
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
  EXPECT_EQ(shapeOf(g, g.outputs[0]), "1x32x8x8");
  const ir::Node& back = producerOf(g, g.outputs[0]);
  EXPECT_EQ(back.opType, "ReorderFromNchwc");
  EXPECT_EQ(ir::attrInt(back, "channels"), 32);
}

TEST(NchwcLayout, FusedConvsKeepActivationResidualAndFusedFromNames) {
  ir::Graph g = loadGraph(residualChain(), "fused");
  opt::fuseConvEpilogues(g);
  opt::eliminateDeadNodes(g);
  opt::convertToNchwcLayout(g);
  ir::verifyGraph(g);
  EXPECT_EQ(opTypes(g),
            (Strings{"ReorderToNchwc", "NchwcConv", "NchwcConv", "NchwcConv", "ReorderFromNchwc"}));
  const ir::Node& conv1 = nodeNamed(g, "conv1");
  EXPECT_EQ(ir::attrString(conv1, "activation"), "Relu");
  EXPECT_EQ(opt::fusedFrom(conv1), (Strings{"conv1", "relu1"}));
  const ir::Node& conv2 = nodeNamed(g, "conv2");
  ASSERT_EQ(conv2.inputs.size(), 4u);  // X, W, B, residual Z (blocked)
  EXPECT_EQ(conv2.inputs[3], conv1.outputs[0]);
  EXPECT_EQ(opt::fusedFrom(conv2), (Strings{"conv2", "add"}));
}

TEST(NchwcLayout, ReadsAFewChannelImagePlainAndReordersWiderInputs) {
  auto m = makeModel(13);
  addInput(m, "rgb", {2, 3, 12, 12});
  addInput(m, "feat", {2, 8, 12, 12});
  addConv(m, "stem", "rgb", "s", 3, 16, 9);
  addConv(m, "side", "feat", "f", 8, 16, 1);
  addNode(m, "Add", {"s", "f"}, {"y"}, "join");
  addOutput(m, "y", {2, 16, 12, 12});
  ir::Graph g = converted(m, "rgb");
  EXPECT_EQ(nodeNamed(g, "stem").inputs[0], g.findValue("rgb"));
  EXPECT_EQ(producerOf(g, nodeNamed(g, "side").inputs[0]).opType, "ReorderToNchwc");
  EXPECT_EQ(countOp(g, "ReorderToNchwc"), 1);
  EXPECT_EQ(countOp(g, "ReorderFromNchwc"), 1);
}

TEST(NchwcLayout, ConvolutionsTheKernelCannotTakeStayPlain) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 32, 8, 8});
  addInput(m, "w_in", {32, 32, 3, 3});  // weights that are not constant
  addConv(m, "to3", "x", "a", 32, 3);   // too few output channels
  addNode(m, "Conv", {"x", "w_in"}, {"b"}, "runtime_w");
  setInts(lastNode(m), "pads", {1, 1, 1, 1});
  addConv(m, "grouped", "x", "c", 32, 32, 3, 16);  // 2 channels per group: not blockable
  addOutput(m, "a", {1, 3, 8, 8});
  addOutput(m, "b", {1, 32, 8, 8});
  addOutput(m, "c", {1, 32, 8, 8});
  int count = -1;
  ir::Graph g = converted(m, "plain", &count);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(opTypes(g), (Strings{"Conv", "Conv", "Conv"}));
  EXPECT_FALSE(opt::wantsNchwc(g, nodeNamed(g, "to3")));
  EXPECT_FALSE(opt::wantsNchwc(g, nodeNamed(g, "runtime_w")));
  EXPECT_FALSE(opt::wantsNchwc(g, nodeNamed(g, "grouped")));
}

TEST(NchwcLayout, StrideOneThreeByThreeConvsRunBlockedForWinograd) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 256, 8, 8});
  addConv(m, "wide3x3", "x", "a", 256, 256);     // blocked: NchwcConv runs it as Winograd
  addConv(m, "wide1x1", "x", "b", 256, 256, 1);  // 1x1: blocked, direct
  addConv(m, "strided", "x", "c", 256, 256);     // stride 2: blocked, direct
  setInts(lastNode(m), "strides", {2, 2});
  addConv(m, "narrow", "x", "d", 256, 128);  // fewer outputs: blocked
  addInput(m, "small", {1, 256, 7, 7});
  addConv(m, "small3x3", "small", "e", 256, 256);  // 7x7 output: blocked
  addOutput(m, "a", {1, 256, 8, 8});
  addOutput(m, "b", {1, 256, 8, 8});
  addOutput(m, "c", {1, 256, 4, 4});
  addOutput(m, "d", {1, 128, 8, 8});
  addOutput(m, "e", {1, 256, 7, 7});
  const ir::Graph g = loadGraph(m, "winograd");
  EXPECT_TRUE(opt::wantsNchwc(g, nodeNamed(g, "wide3x3")));
  EXPECT_TRUE(opt::wantsNchwc(g, nodeNamed(g, "wide1x1")));
  EXPECT_TRUE(opt::wantsNchwc(g, nodeNamed(g, "strided")));
  EXPECT_TRUE(opt::wantsNchwc(g, nodeNamed(g, "narrow")));
  EXPECT_TRUE(opt::wantsNchwc(g, nodeNamed(g, "small3x3")));
}

// RegNet / ResNeXt blocks: 1x1, grouped 3x3 (8 channels per group, 104 channels: the last
// block half full; 16 and 32 per group; stride 2), 1x1, all blocked with one reorder at each end.
TEST(NchwcLayout, GroupedConvsOfWholeBlocksRunBlockedWithoutReorders) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 48, 12, 12});
  addConv(m, "expand", "x", "e", 48, 104, 1);
  addNode(m, "Relu", {"e"}, {"er"}, "relu");
  addConv(m, "g8", "er", "a", 104, 104, 3, 13);
  addConv(m, "reduce", "a", "b", 104, 96, 1);
  addConv(m, "g16s2", "b", "c", 96, 96, 3, 6);
  setInts(lastNode(m), "strides", {2, 2});
  addConv(m, "g48to32", "c", "d", 96, 64, 3, 2);
  addConv(m, "project", "d", "y", 64, 32, 1);
  addOutput(m, "y", {1, 32, 6, 6});
  ir::Graph g = converted(m, "grouped", nullptr);
  EXPECT_EQ(opTypes(g), (Strings{"ReorderToNchwc", "NchwcConv", "Relu", "NchwcConv", "NchwcConv",
                                 "NchwcConv", "NchwcConv", "NchwcConv", "ReorderFromNchwc"}));
  EXPECT_EQ(ir::attrInt(nodeNamed(g, "g8"), "group"), 13);
  // Through the whole pipeline, blocked grouped convs compute what the plain ones do (a short
  // chain: the sums of a long one outgrow the comparison's relative bound).
  auto n = makeModel(13);
  addInput(n, "x", {2, 104, 9, 9});
  addConv(n, "g8", "x", "a", 104, 104, 3, 13);
  addNode(n, "Relu", {"a"}, {"ar"}, "relu");
  addConv(n, "g8s2", "ar", "y", 104, 104, 3, 13);
  setInts(lastNode(n), "strides", {2, 2});
  addOutput(n, "y", {2, 104, 5, 5});
  const ir::Graph fused = fuseAndCompare(n, "grouped_numerics", {{2, 104, 9, 9}});
  EXPECT_EQ(opTypes(fused),
            (Strings{"ReorderToNchwc", "NchwcConv", "NchwcConv", "ReorderFromNchwc"}));
}

// Groups of 8 -> 16 channels in an odd number of groups would need a last slice that ends inside
// a block of Y (ir/ops/nchwc_groups.h): that convolution stays plain, with reorders around it.
TEST(NchwcLayout, GroupedConvsThatDoNotSplitIntoBlocksStayPlain) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 24, 8, 8});
  addConv(m, "g", "x", "y", 24, 48, 3, 3);
  addOutput(m, "y", {1, 48, 8, 8});
  ir::Graph g = converted(m, "grouped_plain", nullptr);
  EXPECT_EQ(opTypes(g), (Strings{"Conv"}));
  EXPECT_EQ(ir::nchwcGroupSlices(24, 48, 3).whyNot,
            "24 -> 48 channels in 3 groups: the last slice of 2 groups would not end on the "
            "tensor's last block");
  EXPECT_EQ(ir::nchwcGroupSlices(32, 32, 16).whyNot,
            "32 -> 32 channels in 16 groups: takes 4, 8 or a multiple of 16 channels per group");
}

// Conv -> Resize (H and W by 2, `mode`) -> [Conv ->] y: the Resize runs on the blocked tensor
// between two blocked convs, and stays plain when its output is the graph output.
// Opset 11 requires the roi input: an empty constant there (PaddleOCR's detector).
onnx::ModelProto resizeBetweenConvs(const std::string& mode, bool convAfter, int64_t opset = 13) {
  auto m = makeModel(opset);
  addInput(m, "x", {1, 16, 6, 7});
  addConv(m, "before", "x", "a", 16, 32);
  addFloatInitializer(m, "scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  addFloatInitializer(m, "roi", {0}, {});
  addNode(m, "Resize", {"a", opset >= 13 ? "" : "roi", "scales"}, {convAfter ? "r" : "y"}, "up");
  auto* attr = lastNode(m)->add_attribute();
  attr->set_name("mode");
  attr->set_type(onnx::AttributeProto::STRING);
  attr->set_s(mode);
  if (convAfter) addConv(m, "after", "r", "y", 32, 16);
  addOutput(m, "y", {1, convAfter ? 16 : 32, 12, 14});
  return m;
}

TEST(NchwcLayout, ResizeBetweenBlockedConvsStaysBlocked) {
  for (const char* mode : {"nearest", "linear"}) {
    const onnx::ModelProto m = resizeBetweenConvs(mode, true);
    EXPECT_EQ(opTypes(converted(m, std::string("resize_") + mode)),
              (Strings{"ReorderToNchwc", "NchwcConv", "Resize", "NchwcConv", "ReorderFromNchwc"}))
        << mode;
    fuseAndCompare(m, std::string("resize_numerics_") + mode, {{1, 16, 6, 7}});
  }
  fuseAndCompare(resizeBetweenConvs("linear", true, 11), "resize_opset11", {{1, 16, 6, 7}});
  // As the graph output, the resized map would be reordered instead of the smaller input.
  EXPECT_EQ(opTypes(converted(resizeBetweenConvs("linear", false), "resize_output")),
            (Strings{"ReorderToNchwc", "NchwcConv", "ReorderFromNchwc", "Resize"}));
}

TEST(NchwcLayout, DepthwiseRunsBlockedAndASmallOutputConvReadsNchw) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 24, 10, 10});
  addConv(m, "expand", "x", "e", 24, 48, 1);
  addFloatInitializer(m, "zero", {}, {0.0f});
  addFloatInitializer(m, "six", {}, {6.0f});
  addNode(m, "Clip", {"e", "zero", "six"}, {"e6"}, "relu6");
  addConv(m, "dw", "e6", "d", 48, 48, 3, 48);
  addConv(m, "project", "d", "y", 48, 3, 1);
  addOutput(m, "y", {1, 3, 10, 10});
  ir::Graph g = converted(m, "depthwise", nullptr);
  EXPECT_EQ(opTypes(g), (Strings{"ReorderToNchwc", "NchwcConv", "Clip", "NchwcConv",
                                 "ReorderFromNchwc", "Conv"}));
  EXPECT_EQ(ir::attrInt(nodeNamed(g, "dw"), "group"), 48);
  EXPECT_EQ(nodeNamed(g, "relu6").inputs[2], g.findValue("six"));
}

TEST(NchwcLayout, PlainConsumersShareOneReorderAndTheBlockedValueStaysInUse) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 16, 6, 6});
  addConv(m, "conv1", "x", "c1", 16, 16);
  addNode(m, "Relu", {"c1"}, {"r"}, "relu");
  addNode(m, "Flatten", {"r"}, {"flat"}, "flatten");
  addNode(m, "Softmax", {"r"}, {"soft"}, "softmax");
  addConv(m, "conv2", "r", "c2", 16, 16);
  addOutput(m, "flat", {1, 576});
  addOutput(m, "soft", {1, 16, 6, 6});
  addOutput(m, "r", {1, 16, 6, 6});
  addOutput(m, "c2", {1, 16, 6, 6});
  ir::Graph g = converted(m, "plain_consumers");
  EXPECT_EQ(countOp(g, "ReorderFromNchwc"), 2);  // r (Flatten, Softmax, graph output) and c2
  const int r = g.findValue("r");
  EXPECT_EQ(producerOf(g, r).opType, "ReorderFromNchwc");
  EXPECT_EQ(nodeNamed(g, "flatten").inputs[0], r);
  EXPECT_EQ(nodeNamed(g, "softmax").inputs[0], r);
  EXPECT_EQ(nodeNamed(g, "conv2").inputs[0], nodeNamed(g, "relu").outputs[0]);  // no round trip
}

// Two blocked inputs of `a` and `b` channels concatenated on channels.
ir::Graph concatOf(int64_t a, int64_t b, const std::string& tag) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 16, 5, 5});
  addConv(m, "ca", "x", "a", 16, a, 1);
  addConv(m, "cb", "x", "b", 16, b, 1);
  addNode(m, "Concat", {"a", "b"}, {"cat"}, "concat");
  setInt(lastNode(m), "axis", 1);
  addConv(m, "after", "cat", "y", a + b, 16, 1);
  addOutput(m, "y", {1, 16, 5, 5});
  return converted(m, tag);
}

TEST(NchwcLayout, ConcatRunsBlockedWhenNoPaddingChannelLandsInside) {
  ir::Graph whole = concatOf(16, 32, "concat_whole");
  EXPECT_EQ(nodeNamed(whole, "concat").domain, "");
  EXPECT_EQ(shapeOf(whole, nodeNamed(whole, "concat").outputs[0]), "1x3x5x5x16");
  EXPECT_EQ(countOp(whole, "ReorderFromNchwc"), 1);
  ir::Graph lastPartial = concatOf(32, 24, "concat_last_partial");
  EXPECT_EQ(shapeOf(lastPartial, nodeNamed(lastPartial, "concat").outputs[0]), "1x4x5x5x16");
  EXPECT_EQ(countOp(lastPartial, "ReorderFromNchwc"), 1);
  // 24 + 16: the first input's padding would sit inside the result, so Concat runs on NCHW.
  ir::Graph partial = concatOf(24, 16, "concat_partial");
  EXPECT_EQ(shapeOf(partial, nodeNamed(partial, "concat").outputs[0]), "1x40x5x5");
  EXPECT_EQ(countOp(partial, "ReorderFromNchwc"), 3);  // a, b, and y
  EXPECT_EQ(countOp(partial, "ReorderToNchwc"), 2);    // x, cat
}

TEST(NchwcLayout, SqueezeExcitationBroadcastsBlocked) {
  auto m = makeModel(13);
  addInput(m, "x", {2, 32, 7, 7});
  addConv(m, "conv", "x", "c", 32, 32, 1);
  addNode(m, "Sigmoid", {"c"}, {"sg"}, "sigmoid");
  addNode(m, "Mul", {"c", "sg"}, {"silu"}, "silu_mul");
  addNode(m, "GlobalAveragePool", {"silu"}, {"pooled"}, "gap");
  addConv(m, "reduce", "pooled", "red", 32, 8, 1);  // 8 channels: plain
  addNode(m, "Relu", {"red"}, {"redr"}, "relu");
  addConv(m, "expand", "redr", "exp", 8, 32, 1);  // plain 8-channel input reordered
  addNode(m, "HardSigmoid", {"exp"}, {"gate"}, "gate");
  addNode(m, "Mul", {"silu", "gate"}, {"scaled"}, "scale");
  addFloatInitializer(m, "per_channel", {32, 1, 1}, randomFloats(32, 3));
  addNode(m, "Add", {"scaled", "per_channel"}, {"shifted"}, "shift");
  addFloatInitializer(m, "half", {}, {0.5f});
  addNode(m, "Mul", {"shifted", "half"}, {"y"}, "halve");
  addOutput(m, "y", {2, 32, 7, 7});
  ir::Graph g = converted(m, "se");
  const ir::Node& gap = nodeNamed(g, "gap");
  EXPECT_EQ(gap.opType, "NchwcGlobalAveragePool");
  EXPECT_EQ(shapeOf(g, gap.outputs[0]), "2x2x1x1x16");
  EXPECT_EQ(nodeNamed(g, "reduce").opType, "Conv");
  EXPECT_EQ(nodeNamed(g, "expand").opType, "NchwcConv");
  EXPECT_EQ(shapeOf(g, nodeNamed(g, "scale").outputs[0]), "2x2x7x7x16");
  const ir::Value& perChannel = g.value(nodeNamed(g, "shift").inputs[1]);
  ASSERT_TRUE(perChannel.constant.has_value());
  EXPECT_EQ(perChannel.constant->shape(), (Shape{1, 2, 1, 1, 16}));
  EXPECT_EQ(nodeNamed(g, "halve").inputs[1], g.findValue("half"));
  EXPECT_EQ(countOp(g, "ReorderToNchwc"), 2);    // x, and expand's 8-channel input read blocked
  EXPECT_EQ(countOp(g, "ReorderFromNchwc"), 2);  // gap's result for the plain reduce conv, and y
}

TEST(NchwcLayout, BlockConstantPadsChannelsAndBroadcastsSingleChannels) {
  std::vector<float> v(20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  const Tensor blocked = opt::blockConstant(Tensor::fromVector(DataType::kFloat32, {20, 1, 1}, v));
  ASSERT_EQ(blocked.shape(), (Shape{1, 2, 1, 1, 16}));
  for (int64_t c = 0; c < 32; ++c)
    EXPECT_EQ(blocked.data<float>()[c], c < 20 ? static_cast<float>(c + 1) : 0.0f);
  const Tensor row =
      opt::blockConstant(Tensor::fromVector(DataType::kFloat32, {3}, std::vector<float>{1, 2, 3}));
  EXPECT_EQ(row.shape(), (Shape{1, 1, 1, 3, 1}));
}

TEST(NchwcLayout, PoolsRunBlockedAndMaxPoolIndicesStayPlain) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 3, 16, 16});
  addConv(m, "stem", "x", "s", 3, 24, 3);
  addNode(m, "MaxPool", {"s"}, {"mp"}, "maxpool");
  setInts(lastNode(m), "kernel_shape", {3, 3});
  setInts(lastNode(m), "strides", {2, 2});
  setInts(lastNode(m), "pads", {1, 1, 1, 1});
  addNode(m, "AveragePool", {"mp"}, {"ap"}, "avgpool");
  setInts(lastNode(m), "kernel_shape", {2, 2});
  setInts(lastNode(m), "strides", {2, 2});
  addNode(m, "MaxPool", {"ap"}, {"y", "idx"}, "with_indices");
  setInts(lastNode(m), "kernel_shape", {2, 2});
  addOutput(m, "y", {1, 24, 3, 3});
  addOutput(m, "idx", {1, 24, 3, 3}, onnx::TensorProto::INT64);
  ir::Graph g = converted(m, "pools");
  EXPECT_EQ(opTypes(g), (Strings{"NchwcConv", "NchwcMaxPool", "NchwcAveragePool",
                                 "ReorderFromNchwc", "MaxPool"}));
  EXPECT_EQ(shapeOf(g, nodeNamed(g, "maxpool").outputs[0]), "1x2x8x8x16");
  EXPECT_EQ(shapeOf(g, nodeNamed(g, "avgpool").outputs[0]), "1x2x4x4x16");
}

TEST(NchwcLayout, SpatialReductionsBecomeBlockedGlobalPools) {
  auto m = makeModel(18);  // ReduceMax / ReduceMean take axes as an input
  addInput(m, "x", {1, 16, 4, 4});
  addConv(m, "conv", "x", "c", 16, 16, 1);
  addInt64Initializer(m, "hw", {-1, 2});
  addInt64Initializer(m, "w_only", {3});
  addNode(m, "ReduceMax", {"c", "hw"}, {"mx"}, "rmax");
  addNode(m, "ReduceMean", {"c", "w_only"}, {"mw"}, "rmean_w");  // not global: stays plain
  addNode(m, "GlobalMaxPool", {"c"}, {"gm"}, "gmp");
  addOutput(m, "mx", {1, 16, 1, 1});
  addOutput(m, "mw", {1, 16, 4, 1});
  addOutput(m, "gm", {1, 16, 1, 1});
  ir::Graph g = converted(m, "global");
  EXPECT_EQ(nodeNamed(g, "rmax").opType, "NchwcGlobalMaxPool");
  EXPECT_EQ(nodeNamed(g, "rmax").inputs.size(), 1u);
  EXPECT_EQ(nodeNamed(g, "gmp").opType, "NchwcGlobalMaxPool");
  EXPECT_EQ(nodeNamed(g, "rmean_w").opType, "ReduceMean");
  EXPECT_EQ(producerOf(g, nodeNamed(g, "rmean_w").inputs[0]).opType, "ReorderFromNchwc");
}

TEST(NchwcLayout, BinaryOpsWithOperandsThatDoNotBroadcastBlockedStayPlain) {
  auto m = makeModel(13);
  addInput(m, "x", {1, 16, 4, 4});
  addInput(m, "mask", {1, 1, 4, 4});  // broadcasts over channels, not a constant
  addConv(m, "conv", "x", "c", 16, 16, 1);
  addNode(m, "Mul", {"c", "mask"}, {"y"}, "masked");
  addOutput(m, "y", {1, 16, 4, 4});
  ir::Graph g = converted(m, "mask");
  EXPECT_EQ(nodeNamed(g, "masked").domain, "");
  EXPECT_EQ(producerOf(g, nodeNamed(g, "masked").inputs[0]).opType, "ReorderFromNchwc");
  EXPECT_EQ(shapeOf(g, g.outputs[0]), "1x16x4x4");
}

TEST(NchwcLayout, PassNumericsMatchThePlainGraph) {
  fuseAndCompare(residualChain(), "numeric_chain", {{1, 16, 8, 8}});
  // 24 channels: the padding lanes of den are 0 (the per-channel constant is padded with zeros),
  // so d holds inf there; the convolutions after it must not mix padding lanes into real channels.
  auto m = makeModel(13);
  addInput(m, "x", {2, 3, 11, 11});
  addConv(m, "stem", "x", "s", 3, 24, 3);
  addNode(m, "Sigmoid", {"s"}, {"sg"}, "sigmoid");
  addNode(m, "Abs", {"s"}, {"a"}, "abs");
  addFloatInitializer(m, "ones", {24, 1, 1}, std::vector<float>(24, 1.0f));
  addNode(m, "Add", {"a", "ones"}, {"den"}, "plus_one");
  addNode(m, "Div", {"sg", "den"}, {"d"}, "div");
  addNode(m, "MaxPool", {"d"}, {"p"}, "pool");
  setInts(lastNode(m), "kernel_shape", {3, 3});
  setInts(lastNode(m), "strides", {2, 2});
  setInt(lastNode(m), "ceil_mode", 1);
  addConv(m, "mix", "p", "mixed", 24, 32, 3);
  addConv(m, "dw", "mixed", "dwo", 32, 32, 3, 32);
  addNode(m, "GlobalAveragePool", {"dwo"}, {"g"}, "gap");
  addNode(m, "Mul", {"dwo", "g"}, {"y"}, "scale");
  addOutput(m, "y", {2, 32, 5, 5});
  ir::Graph fused = fuseAndCompare(m, "numeric_padding", {{2, 3, 11, 11}});
  EXPECT_EQ(countOp(fused, "NchwcConv"), 3);
  EXPECT_EQ(countOp(fused, "ReorderToNchwc"), 0);
  EXPECT_EQ(countOp(fused, "ReorderFromNchwc"), 1);
}

using SetAttrs = std::function<void(onnx::NodeProto*)>;

// The pooling node `op` run on x plain, and on x blocked as kiln::Nchwc<op>; results are equal.
void expectBlockedPoolMatchesPlain(const std::string& op, const Tensor& x,
                                   const SetAttrs& setAttrs) {
  auto plain = makeModel(13);
  auto blocked = makeModel(13);
  auto* kilnOpset = blocked.add_opset_import();
  kilnOpset->set_domain("kiln");
  kilnOpset->set_version(1);
  addInput(plain, "x", x.shape());
  addNode(plain, op, {"x"}, {"y"}, "pool");
  setAttrs(lastNode(plain));
  addInput(blocked, "x", x.shape());
  addNode(blocked, "ReorderToNchwc", {"x"}, {"xb"}, "to");
  lastNode(blocked)->set_domain("kiln");
  addNode(blocked, "Nchwc" + op, {"xb"}, {"yb"}, "pool");
  lastNode(blocked)->set_domain("kiln");
  setAttrs(lastNode(blocked));
  addNode(blocked, "ReorderFromNchwc", {"yb"}, {"y"}, "from");
  lastNode(blocked)->set_domain("kiln");
  setInt(lastNode(blocked), "channels", x.dim(1));
  for (auto* m : {&plain, &blocked}) {
    auto* out = m->mutable_graph()->add_output();
    out->set_name("y");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  auto dir = tempDir("nchwc_pool_" + op);
  const NamedTensors want = Session(saveModel(plain, dir / "plain.onnx")).run({{"x", x}});
  const NamedTensors got = Session(saveModel(blocked, dir / "blocked.onnx")).run({{"x", x}});
  ASSERT_EQ(got[0].second.shape(), want[0].second.shape());
  EXPECT_EQ(valuesOf<float>(got[0].second), valuesOf<float>(want[0].second));
}

TEST(NchwcPool, MatchesThePlainPoolsExactly) {
  const Shape shape = {2, 20, 9, 11};
  const Tensor x =
      Tensor::fromVector(DataType::kFloat32, shape, randomFloats(shapeNumel(shape), 9));
  for (const std::string op : {"MaxPool", "AveragePool"}) {
    SCOPED_TRACE(op);
    expectBlockedPoolMatchesPlain(op, x, [](onnx::NodeProto* n) {
      setInts(n, "kernel_shape", {3, 3});
      setInts(n, "strides", {2, 2});
      setInts(n, "pads", {1, 1, 1, 1});
    });
    expectBlockedPoolMatchesPlain(op, x, [](onnx::NodeProto* n) {
      setInts(n, "kernel_shape", {3, 2});
      setInts(n, "strides", {2, 3});
      setInt(n, "ceil_mode", 1);
    });
    expectBlockedPoolMatchesPlain(op, x, [](onnx::NodeProto* n) {
      setInts(n, "kernel_shape", {2, 2});
      setInts(n, "pads", {0, 1, 1, 0});
      setInts(n, "dilations", {2, 2});
    });
    expectBlockedPoolMatchesPlain(op, x, [](onnx::NodeProto* n) {
      setInts(n, "kernel_shape", {4, 3});
      auto* a = n->add_attribute();
      a->set_name("auto_pad");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s("SAME_UPPER");
    });
  }
  expectBlockedPoolMatchesPlain("AveragePool", x, [](onnx::NodeProto* n) {
    setInts(n, "kernel_shape", {3, 3});
    setInts(n, "pads", {1, 2, 2, 1});
    setInt(n, "count_include_pad", 1);
  });
  expectBlockedPoolMatchesPlain("GlobalAveragePool", x, [](onnx::NodeProto*) {});
  expectBlockedPoolMatchesPlain("GlobalMaxPool", x, [](onnx::NodeProto*) {});
}

TEST(NchwcPool, RefusesAPlainInput) {
  const Tensor x = Tensor::fromVector(DataType::kFloat32, {1, 16, 4, 4}, randomFloats(256, 2));
  try {
    SingleNodeModel("NchwcMaxPool", 1, "kiln")
        .attr("kernel_shape", std::vector<int64_t>{2, 2})
        .input("x", x)
        .output("y")
        .run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("NchwcMaxPool_under_test"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("must be blocked"));
  }
}

}  // namespace
}  // namespace kiln
