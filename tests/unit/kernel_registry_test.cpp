// The kernel registry's candidates (a declining candidate says why and the next one runs; an ISA
// the host lacks is declined by name), the ids the executor records, and kernel workspaces in the
// memory plan (a pool limit below the need fails the build with the numbers).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "engine/executor.h"
#include "engine_test_support.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

ir::Node fakeNode() {
  ir::Node node;
  node.name = "fake1";
  node.domain = "kiln_test";
  node.opType = "FakeOp";
  return node;
}

const ir::TypeInfo kFloatX{DataType::kFloat32, ir::symShapeOf({2, 3})};

cpu::KernelCandidate candidate(std::string id, cpu::CpuIsa isa, std::string reason, int* ran,
                               int mark) {
  cpu::KernelCandidate c;
  c.id = std::move(id);
  c.isa = isa;
  if (!reason.empty()) c.supports = [reason](const cpu::KernelCreateInfo&) { return reason; };
  c.create = [ran, mark](const cpu::KernelCreateInfo&) {
    return cpu::Kernel{[ran, mark](cpu::KernelContext&) { *ran = mark; }, {}, {}};
  };
  return c;
}

// Runs the kernel the registry makes for the node; returns which candidate's ran.
int runMadeKernel(const cpu::KernelRegistry& registry, const cpu::KernelCreateInfo& info,
                  int* ran) {
  *ran = 0;
  const cpu::Kernel kernel = cpu::KernelRegistry::create(info, registry.select(info));
  std::vector<Tensor> outs(1);
  std::vector<ir::TypeInfo> types(1);
  cpu::KernelContext ctx(info.node, {}, outs, types);
  kernel.run(ctx);
  return *ran;
}

TEST(KernelRegistry, DecliningCandidateSaysWhyAndTheNextRuns) {
  cpu::KernelRegistry registry;
  int ran = 0;
  registry.addCandidate(
      "kiln_test", "FakeOp", DataType::kFloat32,
      candidate("f32_fake_tiled_avx2", cpu::CpuIsa::kAvx2, "the tile needs 16 columns", &ran, 1));
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_plain_avx2", cpu::CpuIsa::kAvx2, "", &ran, 2));
  const ir::Node node = fakeNode();
  const cpu::KernelCreateInfo info{node, {&kFloatX}, {nullptr}, {}};
  const cpu::KernelSelection s = registry.select(info);
  ASSERT_NE(s.chosen, nullptr);
  EXPECT_EQ(s.chosen->id, "f32_fake_plain_avx2");
  EXPECT_THAT(s.declined, ElementsAre(Pair("f32_fake_tiled_avx2", "the tile needs 16 columns")));
  EXPECT_EQ(runMadeKernel(registry, info, &ran), 2);
}

TEST(KernelRegistry, IsaTheHostLacksIsDeclinedByName) {
  cpu::KernelRegistry registry;
  int ran = 0;
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_avx512", cpu::CpuIsa::kAvx512, "", &ran, 1));
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_avx2", cpu::CpuIsa::kAvx2, "", &ran, 2));
  const ir::Node node = fakeNode();
  const cpu::KernelCreateInfo info{node, {&kFloatX}, {nullptr}, {}};
  cpu::ScopedCpuIsaLimit limit(cpu::CpuIsa::kAvx2);
  const cpu::KernelSelection s = registry.select(info);
  ASSERT_NE(s.chosen, nullptr);
  EXPECT_EQ(s.chosen->id, "f32_fake_avx2");
  EXPECT_THAT(s.declined, ElementsAre(Pair("f32_fake_avx512", "needs avx512f")));
  EXPECT_EQ(runMadeKernel(registry, info, &ran), 2);
}

TEST(KernelRegistry, ExtensionIsaIsDeclinedByItsFeatureNameUnderALimit) {
  cpu::KernelRegistry registry;
  int ran = 0;
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_avx512bf16", cpu::CpuIsa::kAvx512Bf16, "", &ran, 1));
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_avx2", cpu::CpuIsa::kAvx2, "", &ran, 2));
  const ir::Node node = fakeNode();
  const cpu::KernelCreateInfo info{node, {&kFloatX}, {nullptr}, {}};
  cpu::ScopedCpuIsaLimit limit(cpu::CpuIsa::kAvx512Vnni);
  const cpu::KernelSelection s = registry.select(info);
  ASSERT_NE(s.chosen, nullptr);
  EXPECT_THAT(s.declined, ElementsAre(Pair("f32_fake_avx512bf16", "needs avx512bf16")));
}

TEST(CpuIsa, ExtensionLevelsImplyAvx512AndALimitCapsThem) {
  using cpu::CpuIsa;
  for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Bf16, CpuIsa::kAvx512Fp16}) {
    if (cpu::cpuHas(isa)) EXPECT_TRUE(cpu::cpuHas(CpuIsa::kAvx512)) << cpu::cpuIsaName(isa);
  }
  if (cpu::cpuHas(CpuIsa::kAvx512Bf16)) EXPECT_TRUE(cpu::cpuHas(CpuIsa::kAvx512Vnni));
  EXPECT_TRUE(cpu::cpuSupports(CpuIsa::kAvx2));
  cpu::ScopedCpuIsaLimit limit(CpuIsa::kAvx2);
  for (CpuIsa isa : {CpuIsa::kAvxVnni, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Bf16,
                     CpuIsa::kAvx512Fp16}) {
    EXPECT_FALSE(cpu::cpuSupports(isa)) << cpu::cpuIsaName(isa);
  }
  EXPECT_EQ(cpu::activeCpuIsa(), CpuIsa::kAvx2);
}

TEST(KernelRegistry, DtypeFamilyFirstThenAnyDtypeAndEveryReasonWhenNoneApplies) {
  cpu::KernelRegistry registry;
  int ran = 0;
  registry.addCandidate("kiln_test", "FakeOp", DataType::kUndefined,
                        candidate("any_fake_generic", cpu::CpuIsa::kAvx2, "", &ran, 3));
  registry.addCandidate(
      "kiln_test", "FakeOp", DataType::kFloat32,
      candidate("f32_fake_fast_avx2", cpu::CpuIsa::kAvx2, "K is not a multiple of 8", &ran, 1));
  const ir::Node node = fakeNode();
  const cpu::KernelCreateInfo info{node, {&kFloatX}, {nullptr}, {}};
  EXPECT_EQ(runMadeKernel(registry, info, &ran), 3);
  EXPECT_THAT(registry.select(info).declined,
              ElementsAre(Pair("f32_fake_fast_avx2", "K is not a multiple of 8")));
  // An int64 input has no family of its own: the any-dtype family serves it.
  const ir::TypeInfo intX{DataType::kInt64, ir::symShapeOf({2})};
  const cpu::KernelCreateInfo intInfo{node, {&intX}, {nullptr}, {}};
  EXPECT_EQ(registry.select(intInfo).chosen->id, "any_fake_generic");

  cpu::KernelRegistry strict;
  strict.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                      candidate("f32_fake_a_avx2", cpu::CpuIsa::kAvx2, "reason a", &ran, 1));
  strict.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                      candidate("f32_fake_b_avx2", cpu::CpuIsa::kAvx2, "reason b", &ran, 2));
  try {
    cpu::KernelRegistry::create(info, strict.select(info));
    FAIL() << "no candidate applies, yet a kernel was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupportedNode);
    EXPECT_THAT(e.what(), HasSubstr("fake1"));
    EXPECT_THAT(e.what(), HasSubstr("no CPU kernel supports this node; f32_fake_a_avx2: reason a; "
                                    "f32_fake_b_avx2: reason b"));
  }
}

TEST(KernelRegistry, MostGeneralIsTheLastCandidateThatSupportsTheNode) {
  cpu::KernelRegistry registry;
  int ran = 0;
  registry.addCandidate("kiln_test", "FakeOp", DataType::kUndefined,
                        candidate("any_fake_generic", cpu::CpuIsa::kAvx2, "", &ran, 4));
  registry.addCandidate("kiln_test", "FakeOp", DataType::kFloat32,
                        candidate("f32_fake_fast_avx2", cpu::CpuIsa::kAvx2, "", &ran, 1));
  registry.addCandidate(
      "kiln_test", "FakeOp", DataType::kFloat32,
      candidate("f32_fake_tiled_avx2", cpu::CpuIsa::kAvx2, "needs 16 columns", &ran, 2));
  const ir::Node node = fakeNode();
  const cpu::KernelCreateInfo info{node, {&kFloatX}, {nullptr}, {}};
  EXPECT_EQ(registry.select(info).chosen->id, "f32_fake_fast_avx2");
  const cpu::KernelSelection general = registry.selectMostGeneral(info);
  ASSERT_NE(general.chosen, nullptr);
  EXPECT_EQ(general.chosen->id, "any_fake_generic");
  EXPECT_THAT(general.declined,
              ElementsAre(Pair("f32_fake_tiled_avx2", "needs 16 columns"),
                          Pair("f32_fake_fast_avx2",
                               "passed over: reference kernels take the most general candidate")));
}

TEST(KernelRegistry, GenericFactoriesAreNamedAfterTheirOp) {
  cpu::KernelRegistry registry;
  registry.addGeneric("kiln", "FusedMatMul",
                      [](const cpu::KernelCreateInfo&) { return cpu::KernelFn(); }, {});
  registry.addGeneric("", "LSTM", [](const cpu::KernelCreateInfo&) { return cpu::KernelFn(); },
                      {{0}});
  EXPECT_THAT(registry.candidateIds(),
              ElementsAre("any_fused_mat_mul_generic", "any_lstm_generic"));
  // The global registry: every candidate id is unique.
  std::vector<std::string> ids = cpu::KernelRegistry::global().candidateIds();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
}

// A convolution model (X [1, ci, hw, hw], W [co, ci, k, k], pad k / 2) with the NCHWc layout off.
std::unique_ptr<NetworkDefinition> convNetwork(ILogger& logger, int64_t ci, int64_t co, int64_t hw,
                                               int64_t k) {
  auto network = std::make_unique<NetworkDefinition>(logger);
  ITensor* x = network->addInput("x", DataType::kFloat32, {1, ci, hw, hw});
  std::vector<float> w(static_cast<size_t>(co * ci * k * k), 0.01f);
  ILayer* conv = network->addConvolution(*x, co, {k, k}, floatWeights(w),
                                         floatWeights(std::vector<float>(co, 0.0f)),
                                         {.padding = {k / 2, k / 2}});
  conv->getOutput(0)->setName("y").ok();
  network->markOutput(*conv->getOutput(0)).ok();
  return network;
}

// The build's refusal when the pool limit is one byte below `need` (a workspace alone).
void expectRefusedBelow(const NetworkDefinition& network, BuilderConfig config, uint64_t need) {
  RecordingLogger logger;
  config.setMemoryPoolLimit(need - 1);
  auto refused = Builder(logger).buildSerializedNetwork(network, config);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("(" + std::to_string(need) + " bytes, the largest workspace " +
                        std::to_string(need) +
                        " bytes) at the profiles' max shapes, more than the workspace limit of"));
  EXPECT_THAT(refused.status().message(), HasSubstr("(" + std::to_string(need - 1) + " bytes)"));
}

TEST(KernelWorkspace, Im2colScratchIsPlannedAndAPoolLimitBelowItFailsWithTheNumbers) {
  RecordingLogger logger;
  // 32 -> 32 channels, 3x3, 16x16: im2col + GEMM, whose column buffer is 32 * 9 rows of 16 * 16
  // floats, followed by the GEMM's packing of those columns (W comes packed).
  const uint64_t columns = 32 * 9 * 16 * 16 * sizeof(float);
  const cpu::PackedMatrix w = cpu::PackedMatrix::view(cpu::PackedMatrix::Side::kA,
                                                      cpu::activeCpuIsa(), 32, 32 * 9, nullptr);
  const uint64_t need = columns + cpu::sgemmWorkspaceBytes(w, 16 * 16, 2);
  auto network = convNetwork(logger, 32, 32, 16, 3);
  BuilderConfig config;
  config.setFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT);
  config.setBuilderOptimizationLevel(0);  // the heuristics' im2col + GEMM, whatever the timings say
  config.setThreads(2);
  BuildReport report;
  auto plan = Builder(logger).buildSerializedNetwork(*network, config, &report);
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  EXPECT_THAT(logger.text(Severity::kVERBOSE), HasSubstr("kernel f32_conv_im2col_gemm_"));
  // X and Y are the caller's: the arena holds the workspace alone.
  EXPECT_GT(need, columns);
  EXPECT_EQ(report.maxArenaBytes, need);
  expectRefusedBelow(*network, config, need);
}

// A MatMul against constant weights [K, N], A [M, K] a graph input: f32_matmul_packed_b.
std::unique_ptr<NetworkDefinition> matMulNetwork(ILogger& logger, int64_t M, int64_t K, int64_t N) {
  auto network = std::make_unique<NetworkDefinition>(logger);
  ITensor* a = network->addInput("a", DataType::kFloat32, {M, K});
  std::vector<float> b(static_cast<size_t>(K * N), 0.5f);
  ILayer* weights = network->addConstant({K, N}, floatWeights(b));
  ILayer* product = network->addMatrixMultiply(*a, MatrixOperation::kNONE, *weights->getOutput(0),
                                               MatrixOperation::kNONE);
  product->getOutput(0)->setName("y").ok();
  network->markOutput(*product->getOutput(0)).ok();
  return network;
}

// sgemm's packing buffers are the kernel's planned workspace (no thread_local scratch): the
// arena is what sgemmWorkspaceBytes says for the layer's shapes and the planned threads, and a
// pool limit below it fails the build naming the bytes.
TEST(KernelWorkspace, GemmPackingIsPlannedAndAPoolLimitBelowItFailsWithTheNumbers) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    RecordingLogger logger;
    const int64_t M = 300, K = 256, N = 40;  // rows of A split over the threads, B packed
    auto network = matMulNetwork(logger, M, K, N);
    BuilderConfig config;
    config.setBuilderOptimizationLevel(0);
    config.setThreads(threads);
    BuildReport report;
    auto plan = Builder(logger).buildSerializedNetwork(*network, config, &report);
    ASSERT_TRUE(plan.ok()) << plan.status().toString();
    auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
    ASSERT_TRUE(engine.ok()) << engine.status().toString();
    const LayerInfo& layer = (*engine)->getLayerInfo(0);
    EXPECT_EQ(layer.kernel,
              "f32_matmul_packed_b_" + std::string(cpu::cpuIsaName(cpu::activeCpuIsa())));
    const cpu::PackedMatrix b =
        cpu::PackedMatrix::view(cpu::PackedMatrix::Side::kB, cpu::activeCpuIsa(), K, N, nullptr);
    const uint64_t need = cpu::sgemmWorkspaceBytes(b, M, threads);
    EXPECT_GT(need, 0u);
    EXPECT_EQ(report.maxArenaBytes, need);
    if (threads == 2) EXPECT_GT(need, cpu::sgemmWorkspaceBytes(b, M, 1));  // a slot per thread
    expectRefusedBelow(*network, config, need);
    // And it runs in that workspace: every output is 0.5 * sum(a row).
    auto context = (*engine)->createExecutionContext();
    ASSERT_TRUE(context.ok());
    Tensor a(DataType::kFloat32, {M, K});
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(i % 7);
    ASSERT_TRUE((*context)->setInputTensor("a", a).ok());
    ASSERT_TRUE((*context)->execute().ok());
    auto out = (*context)->getOutputTensor("y");
    ASSERT_TRUE(out.ok());
    for (int64_t r : {int64_t{0}, M / 2, M - 1}) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>((r * K + k) % 7);
      EXPECT_NEAR(out->data<float>()[r * N + N - 1], 0.5 * sum, 1e-3) << "row " << r;
    }
  }
}

TEST(KernelWorkspace, ExecutorRecordsTheChosenKernelsAndPlansTheirWorkspaces) {
  RecordingLogger logger;
  auto network = convNetwork(logger, 32, 32, 16, 3);
  BuilderConfig config;
  config.setFlag(BuilderFlag::kDISABLE_NCHWC_LAYOUT);
  config.setBuilderOptimizationLevel(0);  // the heuristics' choice and its declined list
  auto plan = Builder(logger).buildSerializedNetwork(*network, config);
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  auto engine = Runtime(logger).deserializeEngine(plan->data(), plan->size());
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  const LayerInfo& layer = (*engine)->getLayerInfo(0);
  const std::string isa = cpu::cpuIsaName(cpu::activeCpuIsa());
  EXPECT_EQ(layer.kernel, "f32_conv_im2col_gemm_" + isa);
  // Every float32 candidate before it, in order, with its reason (first the BF16 one, for layers
  // marked bf16).
  std::vector<std::string> declined;
  for (const std::string& d : layer.declinedKernels) declined.push_back(d.substr(0, d.find(':')));
  std::vector<std::string> expected{"bf16_conv_im2col_gemm_avx512bf16"};
  for (const char* name : {"depthwise", "few_outputs", "winograd_f2x2"})
    for (const char* candidateIsa : {"avx512", "avx2"})
      expected.push_back(std::string("f32_conv_") + name + "_" + candidateIsa);
  if (isa == "avx2") expected.push_back("f32_conv_im2col_gemm_avx512");
  EXPECT_EQ(declined, expected);
  ASSERT_GE(layer.declinedKernels.size(), 7u);  // the AVX2 twins say why on any host
  EXPECT_THAT(layer.declinedKernels[0],
              ::testing::AnyOf(HasSubstr("needs avx512bf16"), HasSubstr("not bf16")));
  EXPECT_THAT(layer.declinedKernels[2],
              HasSubstr("not depthwise (kernel 3x3, stride 1, group 1, 32 channels)"));
  EXPECT_THAT(layer.declinedKernels[4],
              HasSubstr("32 output channels, kernel 3x3, stride 1, group 1: takes"));
  // Winograd could run it; the heuristics pass it over (prefers()), as timed tactics need not.
  EXPECT_THAT(layer.declinedKernels[6],
              HasSubstr("heuristics: 32 -> 32 channels: im2col + GEMM is expected to be faster"));
  // It computes the convolution (the column buffer in the planned workspace).
  auto context = (*engine)->createExecutionContext();
  ASSERT_TRUE(context.ok());
  Tensor x(DataType::kFloat32, {1, 32, 16, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.001f * static_cast<float>(i % 97);
  ASSERT_TRUE((*context)->setInputTensor("x", x).ok());
  ASSERT_TRUE((*context)->execute().ok());
  auto out = (*context)->getOutputTensor("y");
  ASSERT_TRUE(out.ok());
  const Tensor& y = *out;
  // The centre pixel of each output channel: 32 * 9 taps of 0.01 * x.
  double centre = 0;
  for (int64_t c = 0; c < 32; ++c)
    for (int64_t dy = -1; dy <= 1; ++dy)
      for (int64_t dx = -1; dx <= 1; ++dx)
        centre += 0.01 * 0.001 * static_cast<double>(((c * 16 + 8 + dy) * 16 + 8 + dx) % 97);
  EXPECT_NEAR(y.data<float>()[8 * 16 + 8], centre, 1e-4);
}

}  // namespace
}  // namespace kiln
