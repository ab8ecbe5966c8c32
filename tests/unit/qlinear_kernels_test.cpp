// The integer-GEMM candidates of QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger
// (backends/cpu/kernels/qgemm_ops.h) against each op's reference kernel (any_<op>_generic, the
// conformance reference), bit for bit: 1x1, 3x3 stride 2 with padding, depthwise, dilated,
// grouped and first-layer convolutions; u8 and s8 activations, s8 and u8 weights, per-tensor and
// per-channel scales and zero points; on every ISA this CPU has, on one thread and two. Then the
// packed weights' round trip through a plan's kernel state, a state that does not fit, and the
// candidate the registry picks under an ISA limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel_registry.h"
#include "kiln/error.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ScopedThreads;
using ::testing::HasSubstr;

std::vector<CpuIsa> isasOfThisCpu() {
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (cpuHas(CpuIsa::kAvxVnni)) isas.push_back(CpuIsa::kAvxVnni);
  if (cpuHas(CpuIsa::kAvx512Vnni)) isas.push_back(CpuIsa::kAvx512Vnni);
  return isas;
}

Tensor randomBytes(DataType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  uint8_t* p = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(dist(rng));
  return t;
}
Tensor scalarOf(DataType dtype, int value) {
  Tensor t(dtype, {});
  static_cast<uint8_t*>(t.raw())[0] = static_cast<uint8_t>(value);
  return t;
}
Tensor floatsOf(Shape shape, const std::vector<float>& v) {
  return Tensor::fromVector(DataType::kFloat32, std::move(shape), v);
}

// One node with its inputs; which of them are constants (weights).
struct NodeUnderTest {
  ir::Node node;
  std::vector<Tensor> inputs;
  std::vector<bool> constant;
  DataType outType = DataType::kUint8;
  Shape outShape;

  std::vector<ir::TypeInfo> types() const {
    std::vector<ir::TypeInfo> t;
    for (const Tensor& x : inputs) t.push_back({x.dtype(), ir::symShapeOf(x.shape())});
    return t;
  }
};

// Runs candidate `id` (or, with a state, its restore) on the node; returns the output's bytes.
std::vector<uint8_t> runCandidate(const NodeUnderTest& n, const std::string& id, int threads,
                                  KernelState* saveInto = nullptr,
                                  const KernelState* restoreFrom = nullptr) {
  const std::vector<ir::TypeInfo> types = n.types();
  KernelCreateInfo info{n.node, {}, {}, {}, nullptr};
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    info.inputTypes.push_back(&types[i]);
    info.constants.push_back(n.constant[i] ? &n.inputs[i] : nullptr);
  }
  const KernelCandidate* c = KernelRegistry::global().findById(info, id);
  if (!c) throw std::runtime_error("no candidate " + id);
  if (c->supports) {
    const std::string reason = c->supports(info);
    if (!reason.empty()) throw std::runtime_error(id + " declines: " + reason);
  }
  const Kernel kernel = restoreFrom ? c->restore(info, *restoreFrom) : c->create(info);
  if (saveInto) *saveInto = kernel.save();
  ScopedThreads pool(threads);
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : n.inputs) inputs.push_back(&t);
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> outTypes = {{n.outType, ir::symShapeOf(n.outShape)}};
  KernelContext ctx(n.node, inputs, outputs, outTypes);
  kernel.run(ctx);
  const uint8_t* p = static_cast<const uint8_t*>(outputs[0].raw());
  return std::vector<uint8_t>(
      p, p + outputs[0].numel() * static_cast<int64_t>(dataTypeSize(outputs[0].dtype())));
}

struct ConvCase {
  std::string name;
  int64_t n, c, h, w, m, kh, kw, stride, pad, dilation, group;
  DataType x, wt;
  bool perChannel;
};

ir::Node convNode(const std::string& op, const ConvCase& t) {
  ir::Node node;
  node.name = t.name;
  node.opType = op;
  node.opset = 10;
  node.attrs["strides"] = std::vector<int64_t>{t.stride, t.stride};
  node.attrs["pads"] = std::vector<int64_t>{t.pad, t.pad, t.pad, t.pad};
  node.attrs["dilations"] = std::vector<int64_t>{t.dilation, t.dilation};
  node.attrs["group"] = t.group;
  return node;
}

Shape convOutShape(const ConvCase& t) {
  auto out = [&](int64_t size, int64_t k) {
    return (size + 2 * t.pad - t.dilation * (k - 1) - 1) / t.stride + 1;
  };
  return {t.n, t.m, out(t.h, t.kh), out(t.w, t.kw)};
}

NodeUnderTest qlinearConv(const ConvCase& t) {
  NodeUnderTest n;
  n.node = convNode("QLinearConv", t);
  const int64_t channels = t.perChannel ? t.m : 1;
  std::vector<float> wScale(static_cast<size_t>(channels));
  for (size_t i = 0; i < wScale.size(); ++i) wScale[i] = 0.002f + 0.0005f * static_cast<float>(i);
  Tensor wZero(t.wt, t.perChannel ? Shape{t.m} : Shape{});
  for (int64_t i = 0; i < wZero.numel(); ++i) {
    static_cast<uint8_t*>(wZero.raw())[i] =
        static_cast<uint8_t>(t.wt == DataType::kInt8 ? (i % 3) * 5 - 5 : 120 + i % 7);
  }
  Tensor bias(DataType::kInt32, {t.m});
  for (int64_t i = 0; i < t.m; ++i) bias.data<int32_t>()[i] = static_cast<int32_t>(i * 131 - 700);
  n.inputs = {randomBytes(t.x, {t.n, t.c, t.h, t.w}, 1),
              floatsOf({}, {0.02f}),
              scalarOf(t.x, t.x == DataType::kInt8 ? -7 : 131),
              randomBytes(t.wt, {t.m, t.c / t.group, t.kh, t.kw}, 2),
              floatsOf(t.perChannel ? Shape{t.m} : Shape{}, wScale),
              wZero,
              floatsOf({}, {0.05f}),
              scalarOf(t.x, t.x == DataType::kInt8 ? 3 : 118),
              bias};
  n.constant = {false, false, false, true, false, false, false, false, false};
  n.outType = t.x;
  n.outShape = convOutShape(t);
  return n;
}

NodeUnderTest convInteger(const ConvCase& t) {
  NodeUnderTest n;
  n.node = convNode("ConvInteger", t);
  Tensor wZero(t.wt, t.perChannel ? Shape{t.m} : Shape{});
  for (int64_t i = 0; i < wZero.numel(); ++i)
    static_cast<uint8_t*>(wZero.raw())[i] = static_cast<uint8_t>(i * 29);
  n.inputs = {randomBytes(t.x, {t.n, t.c, t.h, t.w}, 3),
              randomBytes(t.wt, {t.m, t.c / t.group, t.kh, t.kw}, 4), scalarOf(t.x, 255), wZero};
  n.constant = {false, true, false, false};
  n.outType = DataType::kInt32;
  n.outShape = convOutShape(t);
  return n;
}

const std::vector<ConvCase> kConvCases = {
    {"pointwise", 2, 19, 5, 7, 21, 1, 1, 1, 0, 1, 1, DataType::kUint8, DataType::kInt8, false},
    {"pointwise_s8_per_channel", 1, 64, 6, 6, 40, 1, 1, 1, 0, 1, 1, DataType::kInt8,
     DataType::kInt8, true},
    {"3x3_stride2_pad", 1, 13, 11, 9, 17, 3, 3, 2, 1, 1, 1, DataType::kUint8, DataType::kInt8,
     true},
    {"3x3_stride2_wide_rows", 1, 5, 7, 75, 8, 3, 3, 2, 1, 1, 1, DataType::kUint8, DataType::kInt8,
     false},
    {"3x3_u8_weights", 2, 8, 7, 7, 9, 3, 3, 1, 1, 1, 1, DataType::kUint8, DataType::kUint8, true},
    {"depthwise", 2, 24, 9, 10, 24, 3, 3, 1, 1, 1, 24, DataType::kUint8, DataType::kInt8, true},
    {"depthwise_stride2_s8", 1, 16, 12, 11, 16, 3, 3, 2, 1, 1, 16, DataType::kInt8, DataType::kInt8,
     false},
    {"depthwise_5x5_dilated_u8_weights", 1, 20, 13, 9, 20, 5, 5, 1, 2, 2, 20, DataType::kUint8,
     DataType::kUint8, true},
    {"depthwise_small_planes_batch3", 3, 33, 7, 7, 33, 3, 3, 2, 1, 1, 33, DataType::kInt8,
     DataType::kInt8, true},
    {"dilated", 1, 12, 14, 13, 10, 3, 3, 1, 2, 2, 1, DataType::kUint8, DataType::kInt8, false},
    {"groups", 1, 16, 8, 8, 12, 3, 3, 1, 1, 1, 4, DataType::kUint8, DataType::kInt8, true},
    {"first_layer", 1, 3, 23, 21, 16, 7, 7, 2, 3, 1, 1, DataType::kUint8, DataType::kInt8, true},
};

// "u8s8_" or "s8s8_": the candidates' ids spell the activations' type.
std::string idPrefix(DataType activations) {
  return activations == DataType::kInt8 ? "s8s8_" : "u8s8_";
}

// The candidates of `op` that take this case, on every ISA this CPU has.
std::vector<std::string> convCandidates(const std::string& op, const ConvCase& t) {
  const std::string prefix = idPrefix(t.x) + op;
  if (t.c / t.group == 1) {
    std::vector<std::string> ids{prefix + "_depthwise_avx2"};
    if (cpuHas(CpuIsa::kAvx512)) ids.push_back(prefix + "_depthwise_avx512");
    return ids;
  }
  std::vector<std::string> ids;
  const bool pointwise = t.kh == 1 && t.kw == 1 && t.stride == 1 && t.pad == 0;
  for (CpuIsa isa : isasOfThisCpu()) {
    if (pointwise) ids.push_back(prefix + "_pointwise_" + cpuIsaName(isa));
    ids.push_back(prefix + "_im2col_" + cpuIsaName(isa));
  }
  return ids;
}

TEST(QLinearConvKernels, MatchTheReferenceKernelBitForBit) {
  for (const ConvCase& t : kConvCases) {
    const NodeUnderTest n = qlinearConv(t);
    const std::vector<uint8_t> expected = runCandidate(n, "any_qlinear_conv_generic", 1);
    for (const std::string& id : convCandidates("qlinearconv", t)) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(t.name + " " + id + " threads " + std::to_string(threads));
        EXPECT_EQ(runCandidate(n, id, threads), expected);
      }
    }
  }
}

TEST(ConvIntegerKernels, MatchTheReferenceKernelBitForBit) {
  for (const ConvCase& t : kConvCases) {
    const NodeUnderTest n = convInteger(t);
    const std::vector<uint8_t> expected = runCandidate(n, "any_conv_integer_generic", 1);
    for (const std::string& id : convCandidates("convinteger", t)) {
      SCOPED_TRACE(t.name + " " + id);
      EXPECT_EQ(runCandidate(n, id, 2), expected);
    }
  }
}

NodeUnderTest qlinearMatMul(Shape a, int64_t N, DataType at, DataType bt, bool perColumn) {
  NodeUnderTest n;
  n.node.name = "qmm";
  n.node.opType = "QLinearMatMul";
  n.node.opset = 10;
  const int64_t K = a.back();
  std::vector<float> bScale(static_cast<size_t>(perColumn ? N : 1));
  for (size_t i = 0; i < bScale.size(); ++i) bScale[i] = 0.003f + 0.0007f * static_cast<float>(i);
  Tensor bZero(bt, perColumn ? Shape{N} : Shape{});
  for (int64_t i = 0; i < bZero.numel(); ++i)
    static_cast<uint8_t*>(bZero.raw())[i] =
        static_cast<uint8_t>(bt == DataType::kInt8 ? 0 : 128 + i % 3);
  n.outShape = a;
  n.outShape.back() = N;
  n.inputs = {randomBytes(at, a, 5),
              floatsOf({}, {0.03f}),
              scalarOf(at, at == DataType::kInt8 ? -128 : 255),
              randomBytes(bt, {K, N}, 6),
              floatsOf(perColumn ? Shape{N} : Shape{}, bScale),
              bZero,
              floatsOf({}, {0.07f}),
              scalarOf(at, at == DataType::kInt8 ? -2 : 128)};
  n.constant = {false, false, false, true, false, false, false, false};
  n.outType = at;
  return n;
}

TEST(QLinearMatMulKernels, MatchTheReferenceKernelBitForBit) {
  const std::vector<NodeUnderTest> nodes = {
      qlinearMatMul({2, 5, 67}, 33, DataType::kUint8, DataType::kInt8, true),
      qlinearMatMul({1, 768}, 40, DataType::kInt8, DataType::kInt8, false),
      qlinearMatMul({17, 9}, 1, DataType::kUint8, DataType::kUint8, true),
      qlinearMatMul({3}, 50, DataType::kUint8, DataType::kInt8, false),
  };
  for (const NodeUnderTest& n : nodes) {
    const std::vector<uint8_t> expected = runCandidate(n, "any_qlinear_mat_mul_generic", 1);
    for (CpuIsa isa : isasOfThisCpu()) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(n.inputs[0].describe() + " x " + n.inputs[3].describe() + " " +
                     cpuIsaName(isa));
        EXPECT_EQ(
            runCandidate(n, idPrefix(n.inputs[0].dtype()) + "qlinearmatmul_" + cpuIsaName(isa),
                         threads),
            expected);
      }
    }
  }
}

TEST(MatMulIntegerKernels, MatchTheReferenceKernelWithPerRowAndPerColumnZeroPoints) {
  NodeUnderTest n;
  n.node.name = "mmi";
  n.node.opType = "MatMulInteger";
  n.node.opset = 10;
  Tensor aZero(DataType::kUint8, {6});
  for (int64_t i = 0; i < 6; ++i) aZero.data<uint8_t>()[i] = static_cast<uint8_t>(i * 50);
  Tensor bZero(DataType::kInt8, {13});
  for (int64_t i = 0; i < 13; ++i) bZero.data<int8_t>()[i] = static_cast<int8_t>(i * 20 - 128);
  n.inputs = {randomBytes(DataType::kUint8, {2, 6, 35}, 7),
              randomBytes(DataType::kInt8, {35, 13}, 8), aZero, bZero};
  n.constant = {false, true, false, false};
  n.outType = DataType::kInt32;
  n.outShape = {2, 6, 13};
  const std::vector<uint8_t> expected = runCandidate(n, "any_mat_mul_integer_generic", 1);
  for (CpuIsa isa : isasOfThisCpu()) {
    SCOPED_TRACE(cpuIsaName(isa));
    EXPECT_EQ(runCandidate(n, std::string("u8s8_matmulinteger_") + cpuIsaName(isa), 2), expected);
  }
}

TEST(QLinearKernels, PackedWeightsRoundTripThroughAPlanState) {
  for (CpuIsa isa : isasOfThisCpu()) {
    const ConvCase t = kConvCases[10];  // groups: one packed matrix per group
    const NodeUnderTest conv = qlinearConv(t);
    const std::string convId = std::string("u8s8_qlinearconv_im2col_") + cpuIsaName(isa);
    KernelState state;
    const std::vector<uint8_t> direct = runCandidate(conv, convId, 1, &state);
    ASSERT_EQ(state.blobs.size(), 4u);
    // The bytes as a plan would hold them: a copy, kept by its own owner.
    auto bytes = std::make_shared<std::vector<std::vector<uint8_t>>>();
    KernelState copy{state.params, {}, bytes};
    for (const KernelBlob& b : state.blobs)
      bytes->emplace_back(static_cast<const uint8_t*>(b.data),
                          static_cast<const uint8_t*>(b.data) + b.bytes);
    for (const auto& b : *bytes) copy.blobs.push_back({b.data(), b.size()});
    EXPECT_EQ(runCandidate(conv, convId, 2, nullptr, &copy), direct);

    const NodeUnderTest mm = qlinearMatMul({4, 30}, 20, DataType::kUint8, DataType::kInt8, true);
    const std::string mmId = std::string("u8s8_qlinearmatmul_") + cpuIsaName(isa);
    KernelState mmState;
    const std::vector<uint8_t> mmDirect = runCandidate(mm, mmId, 1, &mmState);
    EXPECT_EQ(runCandidate(mm, mmId, 1, nullptr, &mmState), mmDirect);

    // A state packed for another shape is refused, naming the layer.
    KernelState wrong = mmState;
    wrong.blobs[0].bytes -= 64;
    try {
      runCandidate(mm, mmId, 1, nullptr, &wrong);
      ADD_FAILURE() << "a state of the wrong size was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidPlan);
      EXPECT_THAT(e.what(), HasSubstr("layer 'qmm': packed 8-bit weights 0 have"));
    }
  }
}

TEST(QLinearKernels, RegistryPicksTheWidestIsaAndTheReferenceForDynamicWeights) {
  NodeUnderTest n = qlinearConv(kConvCases[2]);  // 3x3 stride 2
  const std::vector<ir::TypeInfo> types = n.types();
  KernelCreateInfo info{n.node, {}, {}, {}, nullptr};
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    info.inputTypes.push_back(&types[i]);
    info.constants.push_back(n.constant[i] ? &n.inputs[i] : nullptr);
  }
  {
    ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
    EXPECT_EQ(KernelRegistry::global().select(info).chosen->id, "u8s8_qlinearconv_im2col_avx2");
  }
  if (cpuHas(CpuIsa::kAvx512Vnni)) {
    EXPECT_EQ(KernelRegistry::global().select(info).chosen->id,
              "u8s8_qlinearconv_im2col_avx512vnni");
  }
  info.constants[3] = nullptr;  // W computed at run time: only the reference takes it
  const KernelSelection s = KernelRegistry::global().select(info);
  EXPECT_EQ(s.chosen->id, "any_qlinear_conv_generic");
  ASSERT_FALSE(s.declined.empty());
  EXPECT_EQ(s.declined[0].first, "u8s8_qlinearconv_nhwc_avx512vnni");
  EXPECT_EQ(s.declined[0].second, "X is not channels-last");
  const auto im2col = std::find_if(s.declined.begin(), s.declined.end(), [](const auto& d) {
    return d.first == "u8s8_qlinearconv_im2col_avx2";
  });
  ASSERT_NE(im2col, s.declined.end());
  EXPECT_EQ(im2col->second, "the weights are not a constant");
}

TEST(QLinearKernels, BadScalesAndZeroPointsAreNamed) {
  NodeUnderTest conv = qlinearConv(kConvCases[2]);
  conv.inputs[4] = floatsOf({2}, {0.1f, 0.2f});  // w_scale: 2 values for 17 channels
  EXPECT_THAT([&] { runCandidate(conv, "u8s8_qlinearconv_im2col_avx2", 1); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("w_scale (input 4) must be float32, one value or 17 values")));
  NodeUnderTest mm = qlinearMatMul({4, 30}, 20, DataType::kUint8, DataType::kInt8, false);
  mm.inputs[5] = Tensor(DataType::kInt8, {3});  // b_zero_point: 3 values for 20 columns
  EXPECT_THAT([&] { runCandidate(mm, "u8s8_qlinearmatmul_avx2", 1); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("b_zero_point (input 5) must be one value or 20 values")));
  mm = qlinearMatMul({4, 30}, 20, DataType::kUint8, DataType::kInt8, false);
  mm.inputs[0] = randomBytes(DataType::kUint8, {4, 31}, 1);
  EXPECT_THAT([&] { runCandidate(mm, "u8s8_qlinearmatmul_avx2", 1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("must have K = 30 columns")));
}

NodeUnderTest quantizeNode(const std::string& op, Tensor x, DataType q, int zeroPoint,
                           float scale) {
  NodeUnderTest n;
  n.node.name = "q";
  n.node.opType = op;
  n.node.opset = 13;
  n.outShape = x.shape();
  n.inputs = {std::move(x), floatsOf({}, {scale}), scalarOf(q, zeroPoint)};
  n.constant = {false, false, false};
  n.outType = op == "QuantizeLinear" ? q : DataType::kFloat32;
  return n;
}

TEST(QuantizePerTensorKernels, MatchTheReferenceKernelsBitForBit) {
  // Ties, values past both ends of the range, infinities and NaN, in a length that leaves a tail.
  std::vector<float> values;
  for (int i = -700; i <= 700; ++i) values.push_back(0.25f * static_cast<float>(i));
  for (float v :
       {1e30f, -1e30f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::nanf(""), 0.5f, 1.5f, 2.5f, -0.5f, -2.5f}) {
    values.push_back(v);
  }
  const Tensor x = floatsOf({static_cast<int64_t>(values.size())}, values);
  for (DataType q : {DataType::kUint8, DataType::kInt8}) {
    for (int zeroPoint :
         q == DataType::kUint8 ? std::vector<int>{0, 131, 255} : std::vector<int>{-128, 5, 127}) {
      SCOPED_TRACE(std::string(dataTypeName(q)) + " zero point " + std::to_string(zeroPoint));
      const NodeUnderTest quantize = quantizeNode("QuantizeLinear", x, q, zeroPoint, 0.5f);
      const std::vector<uint8_t> expected =
          runCandidate(quantize, "any_quantize_linear_generic", 1);
      EXPECT_EQ(runCandidate(quantize, "f32_quantize_linear_per_tensor_avx2", 2), expected);
      const NodeUnderTest dequantize =
          quantizeNode("DequantizeLinear", randomBytes(q, {1003}, 9), q, zeroPoint, 0.037f);
      const std::string id =
          std::string(q == DataType::kUint8 ? "u8" : "s8") + "_dequantize_linear_per_tensor_avx2";
      EXPECT_EQ(runCandidate(dequantize, id, 2),
                runCandidate(dequantize, "any_dequantize_linear_generic", 1));
    }
  }
}

TEST(QuantizePerTensorKernels, DeclinePerAxisScales) {
  NodeUnderTest n = quantizeNode("QuantizeLinear", floatsOf({2, 3}, {1, 2, 3, 4, 5, 6}),
                                 DataType::kUint8, 0, 1.0f);
  n.inputs[1] = floatsOf({3}, {1.0f, 2.0f, 3.0f});
  EXPECT_THAT(
      [&] { runCandidate(n, "f32_quantize_linear_per_tensor_avx2", 1); },
      ::testing::ThrowsMessage<std::runtime_error>(HasSubstr("the scale is not one float32")));
}

}  // namespace
}  // namespace kiln::cpu
