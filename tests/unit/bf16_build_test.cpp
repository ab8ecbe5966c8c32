// BuilderFlag::kBF16 and per-layer precision constraints: which layers are marked bf16 (and get
// BF16 kernels: timed against FP32 under autocast, always when constrained to bf16), outputs
// within BF16's bound of the FP32 build, a layer pinned to FP32 computing exactly as in the FP32
// build, the final-softmax rule, plans restoring the BF16 packing, and the warning (or, under
// kOBEY, the error) on a CPU without AVX512_BF16.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/cpu_isa.h"
#include "build/precision.h"
#include "engine_test_support.h"
#include "random_data.h"

namespace kiln::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 3, kIn = 64, kHidden = 96, kOut = 40;

// x [3, 64] -> fc1 -> Relu -> fc2 (-> Softmax when `softmax`); fc1's output is an output too.
struct TwoLayers {
  std::vector<float> w1 = randomFloats(kHidden * kIn, 1), b1 = randomFloats(kHidden, 2);
  std::vector<float> w2 = randomFloats(kOut * kHidden, 3), b2 = randomFloats(kOut, 4);
  std::unique_ptr<NetworkDefinition> network;

  TwoLayers(ILogger& logger, bool softmax) : network(std::make_unique<NetworkDefinition>(logger)) {
    ITensor* x = network->addInput("x", DataType::kFloat32, {kBatch, kIn});
    ILayer* fc1 = network->addFullyConnected(*x, kHidden, floatWeights(w1), floatWeights(b1));
    fc1->setName("fc1");
    ITensor* h = network->addActivation(*fc1->getOutput(0), ActivationType::kRELU)->getOutput(0);
    ILayer* fc2 = network->addFullyConnected(*h, kOut, floatWeights(w2), floatWeights(b2));
    fc2->setName("fc2");
    ITensor* y = fc2->getOutput(0);
    if (softmax) y = network->addSoftMax(*y)->getOutput(0);
    EXPECT_TRUE(y->setName("y").ok());
    EXPECT_TRUE(network->markOutput(*y).ok());
    EXPECT_TRUE(fc1->getOutput(0)->setName("h").ok());
    EXPECT_TRUE(network->markOutput(*fc1->getOutput(0)).ok());
  }
  ILayer* layer(const std::string& name) {
    for (int i = 0; i < network->getNbLayers(); ++i)
      if (network->getLayer(i)->getName() == name) return network->getLayer(i);
    return nullptr;
  }
};

BuilderConfig bf16Config(uint32_t extraFlags = 0) {
  BuilderConfig c;
  c.setFlag(BuilderFlag::kBF16);
  for (uint32_t bit = 1; bit; bit <<= 1)
    if (extraFlags & bit) c.setFlag(static_cast<BuilderFlag>(bit));
  return c;
}

// The engine's layer that was made from network layer `name` (itself or fused into another).
const LayerInfo* layerFrom(const Engine& engine, const std::string& name) {
  for (int i = 0; i < engine.getNbLayers(); ++i) {
    const LayerInfo& l = engine.getLayerInfo(i);
    if (l.name == name) return &l;
    for (const std::string& f : l.fusedFrom)
      if (f == name) return &l;
  }
  return nullptr;
}

std::map<std::string, Tensor> run(const Engine& engine, const Tensor& x) {
  auto context = engine.createExecutionContext();
  EXPECT_TRUE(context.ok()) << context.status().toString();
  return runContext(**context, engine, {{"x", x}});
}

// BF16's bound on a product term: 2^-8 on each operand, plus FP32 sums of up to 100 terms.
const double kTermError =
    2 * std::ldexp(1.0, -8) + std::ldexp(1.0, -16) + 200 * std::ldexp(1.0, -24);

// Per element of y = x W^T + b ([rows, n] from x [rows, k], W [n, k]): the bound on y's error
// when x is off by xError (per element) and the products are rounded to BF16.
std::vector<double> linearBound(const std::vector<float>& x, const std::vector<double>& xError,
                                const std::vector<float>& w, const std::vector<float>& b,
                                int64_t rows, int64_t k, int64_t n) {
  std::vector<double> bound(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double e = kTermError * std::fabs(b[j]);
      for (int64_t m = 0; m < k; ++m) {
        const double wm = std::fabs(w[j * k + m]);
        e += wm * (kTermError * (std::fabs(x[i * k + m]) + xError[i * k + m]) + xError[i * k + m]);
      }
      bound[i * n + j] = e;
    }
  }
  return bound;
}

void expectWithin(const Tensor& got, const Tensor& want, const std::vector<double>& bound) {
  ASSERT_EQ(got.numel(), want.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_LE(std::fabs(got.data<float>()[i] - want.data<float>()[i]), bound[i] + 1e-6)
        << "element " << i;
  }
}

class Bf16Build : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::cpuSupports(cpu::CpuIsa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  }
  RecordingLogger logger;
  const Tensor x = floats({kBatch, kIn}, randomFloats(kBatch* kIn, 9));
};

// Layers constrained to bf16 (kOBEY) get BF16 kernels whatever their timing says.
TEST_F(Bf16Build, LayersConstrainedToBf16StayWithinTheBound) {
  TwoLayers net(logger, false);
  auto fp32 = buildEngine(logger, *net.network);
  net.layer("fc1")->setPrecision(DataType::kBFloat16);
  net.layer("fc2")->setPrecision(DataType::kBFloat16);
  auto bf16 =
      buildEngine(logger, *net.network,
                  bf16Config(static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)));
  ASSERT_TRUE(fp32 && bf16);
  for (const char* name : {"fc1", "fc2"}) {
    const LayerInfo* l = layerFrom(*bf16, name);
    ASSERT_NE(l, nullptr) << name;
    EXPECT_EQ(l->precision, "bf16") << name;
    EXPECT_EQ(l->kernel.rfind("bf16_", 0), 0u) << l->kernel;
    EXPECT_EQ(l->kernelIsa, "avx512bf16");
    EXPECT_EQ(layerFrom(*fp32, name)->precision, "fp32");
  }
  const auto want = run(*fp32, x), got = run(*bf16, x);
  // fc1's error bound from exact x; fc2's from Relu(h) (Relu does not widen an error) with it.
  const std::vector<float> xs = values(x), hs = values(want.at("h"));
  const std::vector<double> hBound =
      linearBound(xs, std::vector<double>(xs.size(), 0.0), net.w1, net.b1, kBatch, kIn, kHidden);
  std::vector<float> relu(hs.size());
  for (size_t i = 0; i < hs.size(); ++i) relu[i] = std::max(hs[i], 0.0f);
  expectWithin(got.at("h"), want.at("h"), hBound);
  expectWithin(got.at("y"), want.at("y"),
               linearBound(relu, hBound, net.w2, net.b2, kBatch, kHidden, kOut));
  bool differs = false;  // BF16 really ran: some value differs from the FP32 one
  for (int64_t i = 0; i < got.at("h").numel(); ++i)
    differs |= got.at("h").data<float>()[i] != want.at("h").data<float>()[i];
  EXPECT_TRUE(differs);
}

// Without constraints, each eligible layer is timed in BF16 and FP32 and keeps the faster: its
// precision and kernel agree, and the verbose log says why.
TEST_F(Bf16Build, AutocastTimesEachEligibleLayer) {
  TwoLayers net(logger, false);
  auto engine = buildEngine(logger, *net.network, bf16Config());
  ASSERT_TRUE(engine);
  for (const char* name : {"fc1", "fc2"}) {
    const LayerInfo* l = layerFrom(*engine, name);
    ASSERT_NE(l, nullptr) << name;
    EXPECT_EQ(l->kernel.rfind(l->precision == "bf16" ? "bf16_" : "f32_", 0), 0u)
        << l->precision << " " << l->kernel;
  }
  const std::string log = logger.text();
  EXPECT_THAT(log, ::testing::AnyOf(HasSubstr("precision bf16: faster (bf16_"),
                                    HasSubstr("precision fp32: BF16 is not 5 % faster (bf16_")));
}

TEST_F(Bf16Build, ALayerPinnedToFp32IsObeyedAndComputesAsFp32) {
  TwoLayers net(logger, false);
  auto fp32 = buildEngine(logger, *net.network);
  net.layer("fc1")->setPrecision(DataType::kFloat32);
  net.layer("fc2")->setPrecision(DataType::kBFloat16);
  auto mixed =
      buildEngine(logger, *net.network,
                  bf16Config(static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)));
  ASSERT_TRUE(fp32 && mixed);
  EXPECT_EQ(layerFrom(*mixed, "fc1")->precision, "fp32");
  EXPECT_EQ(layerFrom(*mixed, "fc1")->kernel.rfind("f32_", 0), 0u);
  EXPECT_EQ(layerFrom(*mixed, "fc2")->precision, "bf16");
  const auto want = run(*fp32, x), got = run(*mixed, x);
  EXPECT_EQ(values(got.at("h")), values(want.at("h")));  // bit for bit: the same FP32 kernel
}

TEST_F(Bf16Build, PinsAreIgnoredWithoutAConstraintFlag) {
  TwoLayers net(logger, false);
  net.layer("fc1")->setPrecision(DataType::kFloat32);
  auto engine = buildEngine(logger, *net.network, bf16Config());
  ASSERT_TRUE(engine);
  EXPECT_THAT(logger.text(), ::testing::Not(HasSubstr("is constrained to fp32")));
  EXPECT_THAT(logger.text(Severity::kWARNING),
              HasSubstr("layer precisions are ignored without kOBEY_PRECISION_CONSTRAINTS"));
}

TEST_F(Bf16Build, TheFinalSoftmaxInputStaysFp32) {
  TwoLayers net(logger, true);
  net.layer("fc1")->setPrecision(DataType::kBFloat16);
  auto engine =
      buildEngine(logger, *net.network,
                  bf16Config(static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)));
  ASSERT_TRUE(engine);
  EXPECT_EQ(layerFrom(*engine, "fc1")->precision, "bf16");
  EXPECT_EQ(layerFrom(*engine, "fc2")->precision, "fp32");
  EXPECT_THAT(logger.text(), HasSubstr("precision fp32: it feeds the network's final softmax"));
}

TEST_F(Bf16Build, ConvolutionInBf16) {
  auto network = std::make_unique<NetworkDefinition>(logger);
  const std::vector<float> w = randomFloats(16 * 8 * 9, 5), b = randomFloats(16, 6);
  ITensor* x = network->addInput("x", DataType::kFloat32, {1, 8, 12, 12});
  ILayer* conv = network->addConvolution(*x, 16, {3, 3}, floatWeights(w), floatWeights(b));
  conv->setName("conv");
  ASSERT_TRUE(conv->getOutput(0)->setName("y").ok());
  ASSERT_TRUE(network->markOutput(*conv->getOutput(0)).ok());
  BuilderConfig plain;
  plain.setFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT);
  auto fp32 = buildEngine(logger, *network, plain);
  conv->setPrecision(DataType::kBFloat16);
  auto bf16 =
      buildEngine(logger, *network,
                  bf16Config(static_cast<uint32_t>(BuilderFlag::kDISABLE_NCHWC_LAYOUT) |
                             static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)));
  ASSERT_TRUE(fp32 && bf16);
  const std::string kernel = layerFrom(*bf16, "conv")->kernel;  // Conv, or FusedConv when fused
  EXPECT_TRUE(kernel == "bf16_conv_im2col_gemm_avx512bf16" ||
              kernel == "bf16_fused_conv_im2col_gemm_avx512bf16")
      << kernel;
  const Tensor input = floats({1, 8, 12, 12}, randomFloats(8 * 144, 7));
  const auto want = run(*fp32, input), got = run(*bf16, input);
  // Each output sums 72 products of |x|, |w| < 1 and a bias |b| < 1.
  expectWithin(got.at("y"), want.at("y"), std::vector<double>(16 * 100, kTermError * (8 * 9 + 1)));
}

TEST(Bf16BuildFallback, WarnsAndRunsFp32WithoutAvx512Bf16) {
  cpu::ScopedCpuIsaLimit limit(cpu::CpuIsa::kAvx512Vnni);
  RecordingLogger logger;
  TwoLayers net(logger, false);
  auto engine = buildEngine(logger, *net.network, bf16Config());
  ASSERT_TRUE(engine);
  EXPECT_THAT(logger.text(Severity::kWARNING), HasSubstr("kBF16: "));
  EXPECT_THAT(logger.text(Severity::kWARNING), HasSubstr("every layer runs in float32"));
  EXPECT_EQ(layerFrom(*engine, "fc1")->precision, "fp32");
  EXPECT_EQ(layerFrom(*engine, "fc1")->kernel.rfind("f32_", 0), 0u);
}

TEST(Bf16BuildFallback, ObeyingABf16ConstraintWithoutAvx512Bf16IsAnError) {
  cpu::ScopedCpuIsaLimit limit(cpu::CpuIsa::kAvx512Vnni);
  RecordingLogger logger;
  TwoLayers net(logger, false);
  net.layer("fc1")->setPrecision(DataType::kBFloat16);
  Builder builder(logger);
  auto plan = builder.buildSerializedNetwork(
      *net.network, bf16Config(static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("layer 'fc1' is constrained to bf16 (kOBEY_PRECISION_CONSTRAINTS) but"));
}

TEST(Bf16BuildFallback, ABf16LayerNeedsTheFlag) {
  RecordingLogger logger;
  TwoLayers net(logger, false);
  net.layer("fc1")->setPrecision(DataType::kBFloat16);
  Builder builder(logger);
  auto plan = builder.buildSerializedNetwork(*net.network, BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(
      plan.status().message(),
      HasSubstr("layer 'fc1' asks for precision bfloat16 but the builder flag kBF16 is not set"));
}

TEST(LayerPrecisions, ParsesTrtexecSyntax) {
  const auto p = build::parseLayerPrecisions("fc1:fp32,conv/a:b:bf16");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p.at("fc1"), DataType::kFloat32);
  EXPECT_EQ(p.at("conv/a:b"), DataType::kBFloat16);
  for (const char* bad : {"fc1", "fc1:fp64", ":fp32", "fc1:fp32,"}) {
    try {
      build::parseLayerPrecisions(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("is not NAME:TYPE")) << bad;
    }
  }
}

}  // namespace
}  // namespace kiln::testing
