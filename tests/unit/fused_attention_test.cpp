// Transformer-block fusions: the self-attention pass and kiln::FusedAttention kernel (checked
// against a direct double-precision loop), the float32 LayerNormalization rows, and the residual
// Add folded into FusedMatMul when shapes are symbolic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <variant>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/thread_pool.h"
#include "engine/executor.h"
#include "graph_loading.h"
#include "graph_runner.h"
#include "ir/node_attrs.h"
#include "ir/op_schema.h"
#include "model_builder.h"
#include "onnx/loader.h"
#include "opt/passes.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using Strings = std::vector<std::string>;

// A dim given as a number (fixed) or a name (symbolic).
using DimSpec = std::variant<int64_t, std::string>;

void addValue(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<DimSpec>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tt->mutable_shape();
  for (const DimSpec& d : dims) {
    if (const int64_t* v = std::get_if<int64_t>(&d)) {
      shape->add_dim()->set_dim_value(*v);
    } else {
      shape->add_dim()->set_dim_param(std::get<std::string>(d));
    }
  }
}

ir::Graph loadGraph(const onnx::ModelProto& m, const std::string& tag) {
  return loadInferredGraph(m, "fused_attention_" + tag);
}

void expectClose(const Tensor& actual, const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double e = expected[static_cast<size_t>(i)];
    ASSERT_NEAR(actual.data<float>()[i], e, tolerance * std::max(1.0, std::fabs(e)))
        << "at element " << i;
  }
}

std::vector<std::string> opTypes(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  return ops;
}

// The exported attention subgraph over inputs q [B, Sq, H, D], k [B, Sk, H, D], v [B, Sk, H, Dv]
// and an optional mask input; scaleOp is "Mul", "Div" or "" (no scale).
struct AttentionSpec {
  std::vector<DimSpec> q, k, v;
  std::vector<DimSpec> mask;        // empty: no mask
  bool maskIsZeroConstant = false;  // the mask as an all-zero initializer (fixed dims only)
  std::string scaleOp = "Mul";
  float scale = 0.125f;
  bool scaleIsInput = false;  // the scale as a graph input (not a constant)
  bool scaleAfterMask = false;
  int64_t softmaxAxis = -1;
  int64_t opset = 14;
};

onnx::ModelProto attentionModel(const AttentionSpec& s) {
  auto m = makeModel(s.opset);
  addValue(m.mutable_graph()->add_input(), "q", s.q);
  addValue(m.mutable_graph()->add_input(), "k", s.k);
  addValue(m.mutable_graph()->add_input(), "v", s.v);
  if (s.maskIsZeroConstant) {
    std::vector<int64_t> dims;
    for (const DimSpec& d : s.mask) dims.push_back(std::get<int64_t>(d));
    addFloatInitializer(m, "mask", dims,
                        std::vector<float>(static_cast<size_t>(shapeNumel(dims)), 0.0f));
  } else if (!s.mask.empty()) {
    addValue(m.mutable_graph()->add_input(), "mask", s.mask);
  }
  if (s.scaleIsInput) {
    addValue(m.mutable_graph()->add_input(), "c", {});
  } else {
    addFloatInitializer(m, "c", {}, {s.scale});
  }
  addNode(m, "Transpose", {"q"}, {"qt"}, "q_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Transpose", {"k"}, {"kt"}, "k_t");
  setInts(lastNode(m), "perm", {0, 2, 3, 1});
  addNode(m, "Transpose", {"v"}, {"vt"}, "v_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "MatMul", {"qt", "kt"}, {"s0"}, "qk");
  std::string scores = "s0";
  auto addScale = [&]() {
    if (s.scaleOp.empty()) return;
    addNode(m, s.scaleOp, {scores, "c"}, {scores + "_scaled"}, "scale");
    scores += "_scaled";
  };
  if (!s.scaleAfterMask) addScale();
  if (!s.mask.empty()) {
    addNode(m, "Add", {scores, "mask"}, {scores + "_masked"}, "mask_add");
    scores += "_masked";
  }
  if (s.scaleAfterMask) addScale();
  addNode(m, "Softmax", {scores}, {"p"}, "softmax");
  setInt(lastNode(m), "axis", s.softmaxAxis);
  addNode(m, "MatMul", {"p", "vt"}, {"o"}, "pv");
  addNode(m, "Transpose", {"o"}, {"y"}, "out_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  auto* out = m.mutable_graph()->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

struct AttentionDims {
  int64_t B, Sq, Sk, H, D, Dv;
};

// softmax(scale * q k^T + mask) v per batch and head, in double; mask is [B, H, Sq, Sk] expanded.
std::vector<double> attentionReference(const AttentionDims& d, const std::vector<float>& q,
                                       const std::vector<float>& k, const std::vector<float>& v,
                                       const std::vector<double>& mask, double scale) {
  std::vector<double> y(static_cast<size_t>(d.B * d.Sq * d.H * d.Dv));
  std::vector<double> p(static_cast<size_t>(d.Sk));
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t i = 0; i < d.Sq; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < d.Sk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d.D; ++e)
            dot += double(q[((b * d.Sq + i) * d.H + h) * d.D + e]) *
                   k[((b * d.Sk + j) * d.H + h) * d.D + e];
          p[j] = dot * scale + (mask.empty() ? 0.0 : mask[((b * d.H + h) * d.Sq + i) * d.Sk + j]);
          max = std::max(max, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < d.Sk; ++j) sum += p[j] = std::exp(p[j] - max);
        for (int64_t e = 0; e < d.Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < d.Sk; ++j)
            acc += p[j] / sum * v[((b * d.Sk + j) * d.H + h) * d.Dv + e];
          y[((b * d.Sq + i) * d.H + h) * d.Dv + e] = acc;
        }
      }
    }
  }
  return y;
}

// A mask of `shape` (right-aligned onto [B, H, Sq, Sk]) and its expansion to the full scores.
std::vector<double> expandMask(const AttentionDims& d, const Shape& shape,
                               const std::vector<float>& mask) {
  std::vector<double> full(static_cast<size_t>(d.B * d.H * d.Sq * d.Sk));
  const Shape target{d.B, d.H, d.Sq, d.Sk};
  Shape padded(4 - shape.size(), 1);
  padded.insert(padded.end(), shape.begin(), shape.end());
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t i = 0; i < d.Sq; ++i) {
        for (int64_t j = 0; j < d.Sk; ++j) {
          const int64_t idx[4] = {b, h, i, j};
          int64_t off = 0;
          for (int a = 0; a < 4; ++a) off = off * padded[a] + (padded[a] == 1 ? 0 : idx[a]);
          full[((b * d.H + h) * d.Sq + i) * d.Sk + j] = mask[static_cast<size_t>(off)];
        }
      }
    }
  }
  return full;
}

std::vector<DimSpec> fixed(const Shape& s) { return std::vector<DimSpec>(s.begin(), s.end()); }

// Fuses the pattern for these dims and mask shape, checks it became one FusedAttention node, and
// compares its output on random inputs with the reference, on 1 and 2 threads and on each ISA.
void checkFusedAgainstReference(const AttentionDims& d, const Shape& maskShape, bool withMask) {
  SCOPED_TRACE("B=" + std::to_string(d.B) + " Sq=" + std::to_string(d.Sq) + " Sk=" +
               std::to_string(d.Sk) + " H=" + std::to_string(d.H) + " D=" + std::to_string(d.D) +
               " mask=" + (withMask ? shapeToString(maskShape) : "none"));
  AttentionSpec spec;
  spec.q = fixed({d.B, d.Sq, d.H, d.D});
  spec.k = fixed({d.B, d.Sk, d.H, d.D});
  spec.v = fixed({d.B, d.Sk, d.H, d.Dv});
  if (withMask) spec.mask = fixed(maskShape);
  spec.scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  ir::Graph g = loadGraph(attentionModel(spec), "ref");
  opt::fuseLayers(g);
  ir::verifyGraph(g);
  ASSERT_EQ(opTypes(g), Strings{"FusedAttention"});
  EXPECT_EQ(g.nodes[0].domain, "kiln");
  EXPECT_EQ(g.nodes[0].inputs.size(), withMask ? 4u : 3u);
  Strings absorbed =
      withMask ? Strings{"k_t", "mask_add", "out_t", "pv", "q_t", "scale", "softmax", "v_t"}
               : Strings{"k_t", "out_t", "pv", "q_t", "scale", "softmax", "v_t"};
  Strings from = opt::fusedFrom(g.nodes[0]);
  ASSERT_FALSE(from.empty());
  EXPECT_EQ(from[0], "qk");  // the node it is named after comes first
  from.erase(from.begin());
  std::sort(from.begin(), from.end());
  EXPECT_EQ(from, absorbed);
  const auto q = randomFloats(d.B * d.Sq * d.H * d.D, 1, -2.0f, 2.0f);
  const auto k = randomFloats(d.B * d.Sk * d.H * d.D, 2, -2.0f, 2.0f);
  const auto v = randomFloats(d.B * d.Sk * d.H * d.Dv, 3);
  const auto mask = randomFloats(shapeNumel(maskShape), 4, -3.0f, 0.0f);
  std::vector<Tensor> inputs{Tensor::fromVector(DataType::kFloat32, {d.B, d.Sq, d.H, d.D}, q),
                             Tensor::fromVector(DataType::kFloat32, {d.B, d.Sk, d.H, d.D}, k),
                             Tensor::fromVector(DataType::kFloat32, {d.B, d.Sk, d.H, d.Dv}, v)};
  if (withMask) inputs.push_back(Tensor::fromVector(DataType::kFloat32, maskShape, mask));
  const auto expected = attentionReference(
      d, q, k, v, withMask ? expandMask(d, maskShape, mask) : std::vector<double>{}, spec.scale);
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvx512}) {
    cpu::ScopedCpuIsaLimit limit(isa);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(cpu::cpuIsaName(isa)) + " threads " + std::to_string(threads));
      cpu::ThreadPool pool(threads);
      cpu::ThreadPoolScope scope(&pool);
      std::vector<Tensor> out = runGraph(g, inputs);
      ASSERT_EQ(out[0].shape(), (Shape{d.B, d.Sq, d.H, d.Dv}));
      expectClose(out[0], expected, 2e-5);
    }
  }
}

TEST(AttentionFusion, KernelMatchesReferenceAcrossShapesAndMasks) {
  checkFusedAgainstReference({1, 1, 1, 1, 8, 8}, {}, false);
  checkFusedAgainstReference({1, 1, 7, 2, 16, 16}, {1, 1, 1, 7}, true);  // one query row
  checkFusedAgainstReference({2, 17, 17, 3, 8, 8}, {2, 1, 1, 17},
                             true);  // padding mask, odd length
  checkFusedAgainstReference({1, 130, 130, 2, 64, 64}, {130, 130}, true);  // crosses a row block
  checkFusedAgainstReference({2, 5, 9, 4, 12, 20}, {2, 4, 5, 9},
                             true);  // full mask, Sq != Sk, Dv != Dk
  checkFusedAgainstReference({1, 70, 33, 3, 16, 8}, {1, 1, 70, 1},
                             true);  // one value per query row
}

TEST(AttentionFusion, SymbolicShapesWithPaddingMaskFuse) {
  AttentionSpec spec;
  spec.q = {std::string("batch"), std::string("seq"), int64_t{2}, int64_t{8}};
  spec.k = spec.q;
  spec.v = spec.q;
  spec.mask = {std::string("batch"), int64_t{1}, int64_t{1}, std::string("seq")};
  spec.scaleOp = "Div";
  spec.scale = std::sqrt(8.0f);
  ir::Graph g = loadGraph(attentionModel(spec), "symbolic");
  opt::fuseLayers(g);
  ASSERT_EQ(opTypes(g), Strings{"FusedAttention"});
  EXPECT_FLOAT_EQ(ir::attrFloat(g.nodes[0], "scale"), 1.0f / std::sqrt(8.0f));
  const AttentionDims d{3, 6, 6, 2, 8, 8};
  const auto q = randomFloats(3 * 6 * 2 * 8, 5), k = randomFloats(3 * 6 * 2 * 8, 6),
             v = randomFloats(3 * 6 * 2 * 8, 7);
  const auto mask = randomFloats(3 * 6, 8, -10.0f, 0.0f);
  std::vector<Tensor> out =
      runGraph(g, {Tensor::fromVector(DataType::kFloat32, {3, 6, 2, 8}, q),
                   Tensor::fromVector(DataType::kFloat32, {3, 6, 2, 8}, k),
                   Tensor::fromVector(DataType::kFloat32, {3, 6, 2, 8}, v),
                   Tensor::fromVector(DataType::kFloat32, {3, 1, 1, 6}, mask)});
  expectClose(
      out[0],
      attentionReference(d, q, k, v, expandMask(d, {3, 1, 1, 6}, mask), 1.0 / std::sqrt(8.0)),
      2e-5);
}

TEST(AttentionFusion, PatternsThatDifferAreLeftAlone) {
  AttentionSpec base;
  base.q = fixed({1, 4, 2, 8});
  base.k = base.q;
  base.v = base.q;
  base.mask = fixed({1, 1, 1, 4});
  struct Case {
    const char* what;
    AttentionSpec spec;
  };
  std::vector<Case> cases;
  {
    AttentionSpec s = base;
    s.mask = fixed({2, 1, 1, 4});  // would enlarge the scores' batch
    cases.push_back({"mask enlarges the scores", s});
  }
  {
    AttentionSpec s = base;
    s.mask = {std::string("m"), int64_t{1}, int64_t{1}, int64_t{4}};  // batch 1 meets a symbol
    cases.push_back({"mask dim may enlarge the scores", s});
  }
  {
    AttentionSpec s = base;
    s.scaleIsInput = true;
    cases.push_back({"scale not constant", s});
  }
  {
    AttentionSpec s = base;
    s.scaleAfterMask = true;  // would scale the mask too
    cases.push_back({"scale after the mask", s});
  }
  {
    AttentionSpec s = base;
    s.softmaxAxis = 2;
    cases.push_back({"softmax over another axis", s});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ir::Graph g = loadGraph(attentionModel(c.spec), "unmatched");
    opt::fuseLayers(g);
    for (const auto& n : g.nodes) EXPECT_NE(n.opType, "FusedAttention");
  }
}

// The exported mask of a sequence without padding folds to zeros: the fused node drops it.
TEST(AttentionFusion, AllZeroConstantMaskIsDropped) {
  AttentionSpec spec;
  spec.q = fixed({1, 3, 2, 4});
  spec.k = spec.q;
  spec.v = spec.q;
  spec.mask = fixed({1, 1, 1, 3});
  spec.maskIsZeroConstant = true;
  ir::Graph g = loadGraph(attentionModel(spec), "zero_mask");
  opt::fuseLayers(g);
  ASSERT_EQ(opTypes(g), Strings{"FusedAttention"});
  EXPECT_EQ(g.nodes[0].inputs.size(), 3u);
}

TEST(AttentionFusion, BadMaskAtRunTimeNamesTheNode) {
  AttentionSpec spec;
  spec.q = {std::string("n"), int64_t{4}, int64_t{2}, int64_t{8}};
  spec.k = spec.q;
  spec.v = spec.q;
  spec.mask = {std::string("n"), int64_t{1}, int64_t{1}, int64_t{4}};
  ir::Graph g = loadGraph(attentionModel(spec), "bad_mask");
  opt::fuseLayers(g);
  ASSERT_EQ(opTypes(g), Strings{"FusedAttention"});
  // Q has batch 1 and the mask batch 2: the symbol "n" is bound inconsistently by the caller.
  std::vector<Tensor> inputs{
      Tensor(DataType::kFloat32, {1, 4, 2, 8}), Tensor(DataType::kFloat32, {1, 4, 2, 8}),
      Tensor(DataType::kFloat32, {1, 4, 2, 8}), Tensor(DataType::kFloat32, {2, 1, 1, 4})};
  try {
    runGraph(g, inputs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qk"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mask"), std::string::npos) << e.what();
  }
}

// Linear + residual where the Linear's input went through a Reshape to a shape read from x (as
// the attention output does in an export with dynamic axes): its dims are unknown to inference,
// and only tracing them back to x shows the residual is shaped like the output.
onnx::ModelProto reshapedLinearWithResidual(const std::vector<DimSpec>& residualDims) {
  auto m = makeModel(14);
  addValue(m.mutable_graph()->add_input(), "x",
           {std::string("batch"), std::string("seq"), int64_t{8}});
  addValue(m.mutable_graph()->add_input(), "z", residualDims);
  addFloatInitializer(m, "W", {8, 8}, randomFloats(64, 21));
  addFloatInitializer(m, "b", {8}, randomFloats(8, 22));
  addInt64Initializer(m, "zero", {0});
  addInt64Initializer(m, "two", {2});
  addInt64Initializer(m, "eight", {8});
  addNode(m, "Shape", {"x"}, {"shape"}, "shape");
  addNode(m, "Slice", {"shape", "zero", "two", "zero"}, {"rows"}, "slice");
  addNode(m, "Concat", {"rows", "eight"}, {"target"}, "concat");
  setInt(lastNode(m), "axis", 0);
  addNode(m, "Reshape", {"x", "target"}, {"r"}, "reshape");
  addNode(m, "MatMul", {"r", "W"}, {"mm"}, "linear");
  addNode(m, "Add", {"b", "mm"}, {"o"}, "bias");
  addNode(m, "Add", {"z", "o"}, {"y"}, "residual");
  auto* out = m.mutable_graph()->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

TEST(MatMulResidualFusion, SymbolicResidualProvedThroughReshapeFuses) {
  ir::Graph g =
      loadGraph(reshapedLinearWithResidual({std::string("batch"), std::string("seq"), int64_t{8}}),
                "residual");
  const ir::Graph original = g;
  opt::fuseLayers(g);
  ASSERT_EQ(opTypes(g), (Strings{"Shape", "Slice", "Concat", "Reshape", "FusedMatMul"}));
  EXPECT_EQ(g.nodes[4].inputs.size(), 4u);
  EXPECT_EQ(opt::fusedFrom(g.nodes[4]), (Strings{"linear", "bias", "residual"}));
  const auto x = randomFloats(3 * 5 * 8, 23), z = randomFloats(3 * 5 * 8, 24);
  std::vector<Tensor> inputs{Tensor::fromVector(DataType::kFloat32, {3, 5, 8}, x),
                             Tensor::fromVector(DataType::kFloat32, {3, 5, 8}, z)};
  const Tensor expected = runGraph(original, inputs)[0];
  std::vector<double> want(expected.data<float>(), expected.data<float>() + expected.numel());
  expectClose(runGraph(g, inputs)[0], want, 1e-5);
}

TEST(MatMulResidualFusion, ResidualNotProvablyAlikeStaysAnAdd) {
  for (const auto& dims : {std::vector<DimSpec>{std::string("b2"), std::string("seq"), int64_t{8}},
                           std::vector<DimSpec>{int64_t{1}, std::string("seq"), int64_t{8}}}) {
    ir::Graph g = loadGraph(reshapedLinearWithResidual(dims), "residual_other");
    opt::fuseLayers(g);
    EXPECT_EQ(opTypes(g).back(), "Add");
  }
}

// A whole self-attention block as exported: three Linear projections of x, split into heads by
// constant Reshapes, attention, and the heads merged back. Fusion makes it one packed projection
// GEMM and one FusedAttention; the result must match the unfused graph.
TEST(AttentionFusion, ProjectionsPackIntoOneGemm) {
  const int64_t B = 2, S = 19, H = 3, D = 8, C = H * D;
  auto m = makeModel(14);
  addInput(m, "x", {B, S, C});
  addInput(m, "mask", {B, 1, 1, S});
  addInt64Initializer(m, "heads_shape", {B, S, H, D});
  addInt64Initializer(m, "merged_shape", {B, S, C});
  addFloatInitializer(m, "c", {}, {1.0f / std::sqrt(static_cast<float>(D))});
  for (const char* p : {"q", "k", "v"}) {
    const std::string n = p;
    addFloatInitializer(m, "W" + n, {C, C}, randomFloats(C * C, 31 + n[0]));
    addFloatInitializer(m, "b" + n, {C}, randomFloats(C, 41 + n[0]));
    addNode(m, "MatMul", {"x", "W" + n}, {n + "_mm"}, n + "_proj");
    addNode(m, "Add", {"b" + n, n + "_mm"}, {n + "_lin"}, n + "_bias");
    addNode(m, "Reshape", {n + "_lin", "heads_shape"}, {n}, n + "_split");
  }
  addNode(m, "Transpose", {"q"}, {"qt"}, "q_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Transpose", {"k"}, {"kt"}, "k_t");
  setInts(lastNode(m), "perm", {0, 2, 3, 1});
  addNode(m, "Transpose", {"v"}, {"vt"}, "v_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "MatMul", {"qt", "kt"}, {"s0"}, "qk");
  addNode(m, "Mul", {"s0", "c"}, {"s1"}, "scale");
  addNode(m, "Add", {"s1", "mask"}, {"s2"}, "mask_add");
  addNode(m, "Softmax", {"s2"}, {"p"}, "softmax");
  setInt(lastNode(m), "axis", -1);
  addNode(m, "MatMul", {"p", "vt"}, {"o"}, "pv");
  addNode(m, "Transpose", {"o"}, {"ot"}, "out_t");
  setInts(lastNode(m), "perm", {0, 2, 1, 3});
  addNode(m, "Reshape", {"ot", "merged_shape"}, {"y"}, "merge");
  addOutput(m, "y", {B, S, C});
  const ir::Graph original = loadGraph(m, "packed");
  ir::Graph g = original;
  opt::fuseLayers(g);
  ir::verifyGraph(g);
  ASSERT_EQ(opTypes(g), (Strings{"FusedMatMul", "FusedAttention", "Reshape"}));
  EXPECT_EQ(opt::fusedFrom(g.nodes[0]),
            (Strings{"q_proj", "q_bias", "k_proj", "k_bias", "v_proj", "v_bias"}));
  EXPECT_EQ(g.nodes[1].inputs[1], ir::kNoValue);
  EXPECT_EQ(ir::attrInt(g.nodes[1], "num_heads"), H);
  auto mask = randomFloats(B * S, 51, -5.0f, 0.0f);
  mask[S - 1] = -10000.0f;  // padding in the first sequence
  std::vector<Tensor> inputs{
      Tensor::fromVector(DataType::kFloat32, {B, S, C}, randomFloats(B * S * C, 52)),
      Tensor::fromVector(DataType::kFloat32, {B, 1, 1, S}, mask)};
  const Tensor expected = runGraph(original, inputs)[0];
  const std::vector<double> want(expected.data<float>(), expected.data<float>() + expected.numel());
  for (int threads : {1, 2}) {
    cpu::ThreadPool pool(threads);
    cpu::ThreadPoolScope scope(&pool);
    expectClose(runGraph(g, inputs)[0], want, 1e-5);
  }
}

// LayerNormalization on float32 rows (the vectorized path) against a double loop, for row
// lengths around the vector width and enough rows to split over two threads.
TEST(LayerNormKernel, Float32RowsMatchDoubleReference) {
  for (int64_t len : {1, 7, 8, 13, 768}) {
    for (int64_t rows : {1, 3, 64}) {
      SCOPED_TRACE("len " + std::to_string(len) + " rows " + std::to_string(rows));
      auto m = makeModel(17);
      addInput(m, "x", {rows, len});
      addFloatInitializer(m, "g", {len}, randomFloats(len, 11, 0.5f, 1.5f));
      addFloatInitializer(m, "b", {len}, randomFloats(len, 12));
      addNode(m, "LayerNormalization", {"x", "g", "b"}, {"y"}, "ln");
      addOutput(m, "y", {rows, len});
      ir::Graph g = loadGraph(m, "ln");
      const auto x =
          randomFloats(rows * len, 13, 3.0f, 5.0f);  // a large mean: the variance must not cancel
      const auto gamma = randomFloats(len, 11, 0.5f, 1.5f), beta = randomFloats(len, 12);
      std::vector<double> expected;
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < len; ++i) mean += x[r * len + i];
        mean /= len;
        for (int64_t i = 0; i < len; ++i) var += (x[r * len + i] - mean) * (x[r * len + i] - mean);
        var /= len;
        for (int64_t i = 0; i < len; ++i)
          expected.push_back((x[r * len + i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + beta[i]);
      }
      cpu::ThreadPool pool(2);
      cpu::ThreadPoolScope scope(&pool);
      std::vector<Tensor> out =
          runGraph(g, {Tensor::fromVector(DataType::kFloat32, {rows, len}, x)});
      expectClose(out[0], expected, 2e-5);
    }
  }
}

}  // namespace
}  // namespace kiln
