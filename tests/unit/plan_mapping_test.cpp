// Compiled plans: a plan file is memory-mapped and the kernels that pack weights are made over the
// packed state the plan holds, so their packed weights lie inside the file mapping (checked
// against /proc/self/maps), the original weights are not in the plan, and the outputs equal the
// ONNX path's bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_impl.h"
#include "engine_test_support.h"
#include "kiln/onnx_parser.h"
#include "kiln/session.h"
#include "model_builder.h"
#include "random_data.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::HasSubstr;

// x [1, 32, 14, 14] -> Conv 3x3 (32 -> 48, pad 1) -> Relu -> GlobalAveragePool -> Flatten -> MatMul
// B [48, 10].
std::string convMatMulModel(const std::filesystem::path& dir) {
  onnx::ModelProto model = makeModel(13);
  addInput(model, "x", {1, 32, 14, 14});
  addFloatInitializer(model, "w", {48, 32, 3, 3}, randomFloats(48 * 32 * 9, 11));
  addFloatInitializer(model, "b", {48, 10}, randomFloats(48 * 10, 12));
  addNode(model, "Conv", {"x", "w"}, {"c"}, "conv");
  setInts(lastNode(model), "kernel_shape", {3, 3});
  setInts(lastNode(model), "pads", {1, 1, 1, 1});
  addNode(model, "Relu", {"c"}, {"r"}, "relu");
  addNode(model, "GlobalAveragePool", {"r"}, {"p"}, "pool");
  addNode(model, "Flatten", {"p"}, {"f"}, "flatten");
  addNode(model, "MatMul", {"f", "b"}, {"y"}, "fc");
  addOutput(model, "y", {1, 10});
  return saveModel(model, dir / "model.onnx");
}

std::string buildPlanFile(const std::string& modelPath, const std::filesystem::path& dir) {
  RecordingLogger logger;
  NetworkDefinition network(logger);
  OnnxParser parser(network, logger);
  EXPECT_TRUE(parser.parseFromFile(modelPath).ok());
  BuilderConfig config;
  config.setThreads(1);
  config.setBuilderOptimizationLevel(0);  // the heuristics' kernels, which the tests name
  auto plan = Builder(logger).buildSerializedNetwork(network, config);
  EXPECT_TRUE(plan.ok()) << plan.status().toString();
  const std::string path = (dir / "model.kiln").string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(plan->data()),
             static_cast<std::streamsize>(plan->size()));
  return path;
}

// Whether [p, p + bytes) lies in a mapping of the file at `path`, as /proc/self/maps lists it.
bool insideFileMapping(const void* p, uint64_t bytes, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < path.size() ||
        line.compare(line.size() - path.size(), path.size(), path) != 0)
      continue;
    std::istringstream fields(line);
    std::string range;
    fields >> range;
    const uintptr_t begin = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (at >= begin && at + bytes <= end) return true;
  }
  return false;
}

TEST(PlanMapping, PackedWeightsAreServedFromTheMappedFileAndOutputsMatchTheOnnxPath) {
  const auto dir = tempDir("plan_mapping");
  const std::string model = convMatMulModel(dir);
  const std::string planPath = std::filesystem::canonical(buildPlanFile(model, dir)).string();

  size_t size = 0;
  std::shared_ptr<const void> mapping = mapPlanFile(planPath, size);
  plan::Plan plan = plan::readPlan(mapping.get(), size, plan::detectCpuFeatures(), mapping);
  // The conv's W and the MatMul's B are only in their layers' packed states.
  for (const char* name : {"w", "b"}) {
    const ir::Value& v = plan.graph->value(plan.graph->valueIds.at(name));
    ASSERT_TRUE(v.constant) << name;
    EXPECT_EQ(v.constant->raw(), nullptr)
        << name << " is written in the plan besides its packed copy";
  }
  auto impl = loadEngine(std::move(plan), mapping);
  const std::vector<cpu::KernelState> states = impl->executor->kernelStates();
  int packedLayers = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    const LayerInfo& layer = impl->plan.layers[i];
    for (const cpu::KernelBlob& blob : states[i].blobs) {
      EXPECT_TRUE(insideFileMapping(blob.data, blob.bytes, planPath))
          << "layer " << layer.name << " (" << layer.kernel
          << "): its packed weights are not in the mapped plan";
      EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.data) % 64, 0u) << layer.name;
    }
    if (!states[i].blobs.empty()) ++packedLayers;
  }
  std::string kernels;
  for (const LayerInfo& l : impl->plan.layers) kernels += l.kernel + " ";
  EXPECT_THAT(kernels, HasSubstr("f32_nchwc_conv_"));
  EXPECT_THAT(kernels, ::testing::ContainsRegex("f32_(fused_)?matmul_packed_b_"));
  EXPECT_EQ(packedLayers, 2) << kernels;

  Engine engine(impl);
  auto context = engine.createExecutionContext();
  ASSERT_TRUE(context.ok());
  Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {1, 32, 14, 14},
                                       randomFloats(32 * 14 * 14, 13));
  auto fromPlan = runContext(**context, engine, {{"x", x}});
  SessionOptions options;
  options.threads = 1;
  Session session(model, options);
  const NamedTensors fromOnnx = session.run({{"x", x}});
  ASSERT_EQ(fromOnnx.size(), 1u);
  ASSERT_EQ(fromPlan.count("y"), 1u);
  EXPECT_EQ(values(fromPlan["y"]), values(fromOnnx[0].second));

  // Through the public API as well: the same file, mapped by the runtime.
  RecordingLogger logger;
  auto loaded = Runtime(logger).deserializeEngineFromFile(planPath);
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  auto context2 = (*loaded)->createExecutionContext();
  ASSERT_TRUE(context2.ok());
  EXPECT_EQ(values(runContext(**context2, **loaded, {{"x", x}})["y"]), values(fromOnnx[0].second));
}

// x [1, 32, 16, 16] -> Conv 5x5 (32 -> 3, pad 2): the few-output-channels kernel's case.
std::string fewOutputsModel(const std::filesystem::path& dir) {
  onnx::ModelProto model = makeModel(13);
  addInput(model, "x", {1, 32, 16, 16});
  addFloatInitializer(model, "w", {3, 32, 5, 5}, randomFloats(3 * 32 * 25, 31));
  addNode(model, "Conv", {"x", "w"}, {"y"}, "conv");
  setInts(lastNode(model), "kernel_shape", {5, 5});
  setInts(lastNode(model), "pads", {2, 2, 2, 2});
  addOutput(model, "y", {1, 3, 16, 16});
  return saveModel(model, dir / "few_outputs.onnx");
}

TEST(PlanMapping, TheFewOutputsConvIsRestoredFromTheMappedFile) {
  const auto dir = tempDir("plan_few_outputs");
  const std::string model = fewOutputsModel(dir);
  const std::string planPath = std::filesystem::canonical(buildPlanFile(model, dir)).string();
  size_t size = 0;
  std::shared_ptr<const void> mapping = mapPlanFile(planPath, size);
  plan::Plan plan = plan::readPlan(mapping.get(), size, plan::detectCpuFeatures(), mapping);
  const ir::Value& w = plan.graph->value(plan.graph->valueIds.at("w"));
  ASSERT_TRUE(w.constant);
  EXPECT_EQ(w.constant->raw(), nullptr) << "W is written in the plan besides its packed copy";
  auto impl = loadEngine(std::move(plan), mapping);
  ASSERT_EQ(impl->plan.layers.size(), 1u);
  EXPECT_THAT(impl->plan.layers[0].kernel, HasSubstr("few_outputs"));
  const std::vector<cpu::KernelState> states = impl->executor->kernelStates();
  ASSERT_EQ(states[0].blobs.size(), 1u);
  EXPECT_TRUE(insideFileMapping(states[0].blobs[0].data, states[0].blobs[0].bytes, planPath));
  EXPECT_EQ(states[0].blobs[0].bytes, 3u * 32 * 25 * sizeof(float));

  Engine engine(impl);
  auto context = engine.createExecutionContext();
  ASSERT_TRUE(context.ok());
  Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {1, 32, 16, 16},
                                       randomFloats(32 * 16 * 16, 32));
  SessionOptions options;
  options.threads = 1;
  EXPECT_EQ(values(runContext(**context, engine, {{"x", x}})["y"]),
            values(Session(model, options).run({{"x", x}})[0].second));
}

TEST(PlanMapping, APackedStateOfTheWrongSizeIsRefusedNamingTheLayer) {
  const auto dir = tempDir("plan_mapping_damaged");
  const std::string planPath = buildPlanFile(convMatMulModel(dir), dir);
  std::ifstream in(planPath, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  plan::Plan p = plan::readPlan(bytes.data(), bytes.size());
  size_t fc = 0;
  while (fc < p.layers.size() && p.layers[fc].kernel.find("matmul_packed_b") == std::string::npos)
    ++fc;
  ASSERT_LT(fc, p.layers.size());
  ASSERT_EQ(p.kernelStates[fc].blobs.size(), 1u);
  p.kernelStates[fc].blobs[0].bytes -= 64;  // a writer that lost a cache line
  const std::vector<uint8_t> damaged = plan::writePlan(p);
  RecordingLogger logger;
  auto engine = Runtime(logger).deserializeEngine(damaged.data(), damaged.size());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), ErrorCode::kInvalidPlan);
  EXPECT_THAT(
      engine.status().message(),
      HasSubstr("layer '" + p.layers[fc].name + "': packed weights 0 have " +
                std::to_string(p.kernelStates[fc].blobs[0].bytes) + " bytes; its kernel packs " +
                std::to_string(p.kernelStates[fc].blobs[0].bytes + 64)));
}

std::vector<char> readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The packed section ends the file and has a checksum of its own: a mapped load leaves it to the
// first run unless asked to verify it; a load from bytes, and every other byte, are always checked.
TEST(PlanMapping, PackedWeightsChecksumIsCheckedOnRequestAndTheRestAlways) {
  const auto dir = tempDir("plan_packed_checksum");
  const std::string planPath = buildPlanFile(convMatMulModel(dir), dir);
  std::vector<char> bytes = readBytes(planPath);
  bytes[bytes.size() - 10] ^= 1;  // inside the packed weights
  const std::string damaged = (dir / "damaged.kiln").string();
  writeBytes(damaged, bytes);
  RecordingLogger logger;
  Runtime runtime(logger);
  EXPECT_TRUE(runtime.deserializeEngineFromFile(damaged).ok());
  runtime.setVerifyPackedWeights(true);
  auto verified = runtime.deserializeEngineFromFile(damaged);
  ASSERT_FALSE(verified.ok());
  EXPECT_THAT(verified.status().message(),
              HasSubstr(damaged + ": packed weights checksum mismatch"));
  auto fromBytes = runtime.deserializeEngine(bytes.data(), bytes.size());
  ASSERT_FALSE(fromBytes.ok());
  EXPECT_THAT(fromBytes.status().message(), HasSubstr("packed weights checksum mismatch"));

  std::vector<char> header = readBytes(planPath);
  header[200] ^= 1;  // in the sections before the packed one
  writeBytes(damaged, header);
  runtime.setVerifyPackedWeights(false);
  auto mapped = runtime.deserializeEngineFromFile(damaged);
  ASSERT_FALSE(mapped.ok());
  EXPECT_THAT(mapped.status().message(), HasSubstr("plan checksum mismatch"));
}

// ids [N] int64 -> Gather(table [6000, 8] float, ids) -> Add(bias [8]) -> y: the table is a large
// float constant no kernel packs (an embedding), the bias a small one.
std::string embeddingModel(const std::filesystem::path& dir) {
  onnx::ModelProto model = makeModel(13);
  auto* ids = model.mutable_graph()->add_input();
  setValueInfo(ids, "ids", onnx::TensorProto::INT64, {4});
  addFloatInitializer(model, "table", {6000, 8}, randomFloats(6000 * 8, 21));
  addFloatInitializer(model, "bias", {8}, randomFloats(8, 22));
  addNode(model, "Gather", {"table", "ids"}, {"rows"}, "embed");
  addNode(model, "Add", {"rows", "bias"}, {"y"}, "add");
  addOutput(model, "y", {4, 8});
  return saveModel(model, dir / "embedding.onnx");
}

// Large float constants lie in the packed section (plan format 4): a mapped load serves them from
// the file without reading them, under the packed checksum; small ones stay under the header's.
TEST(PlanMapping, LargeFloatConstantsAreServedFromThePackedSectionOfTheMapping) {
  const auto dir = tempDir("plan_large_constants");
  const std::string modelPath = embeddingModel(dir);
  const std::string planPath = buildPlanFile(modelPath, dir);
  size_t size = 0;
  std::shared_ptr<const void> mapping = mapPlanFile(planPath, size);
  plan::Plan plan = plan::readPlan(mapping.get(), size, plan::detectCpuFeatures(), mapping,
                                   plan::PackedCheck::kSkip);
  const ir::Value& table = plan.graph->value(plan.graph->findValue("table"));
  ASSERT_TRUE(table.constant.has_value());
  EXPECT_TRUE(insideFileMapping(table.constant->raw(), table.constant->byteSize(), planPath));
  const auto* file = static_cast<const uint8_t*>(mapping.get());
  const auto* at = static_cast<const uint8_t*>(table.constant->raw());

  Tensor ids = Tensor::fromVector<int64_t>(DataType::kInt64, {4}, {0, 5999, 17, 17});
  Session session(modelPath);
  const Tensor want = session.run({{"ids", ids}})[0].second;
  RecordingLogger logger;
  Runtime runtime(logger);
  auto engine = runtime.deserializeEngineFromFile(planPath);
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto context = (*engine)->createExecutionContext();
  EXPECT_EQ(values(runContext(**context, **engine, {{"ids", ids}})["y"]), values(want));

  // A flipped bit in the table passes a mapped load unless verified (it lies in the packed
  // section, after the weights section that holds the small bias); one in the bias never does.
  const size_t tableOffset = static_cast<size_t>(at - file);
  std::vector<char> bytes = readBytes(planPath);
  bytes[tableOffset + 100] ^= 1;
  const std::string damaged = (dir / "damaged.kiln").string();
  writeBytes(damaged, bytes);
  EXPECT_TRUE(runtime.deserializeEngineFromFile(damaged).ok());
  runtime.setVerifyPackedWeights(true);
  auto verified = runtime.deserializeEngineFromFile(damaged);
  ASSERT_FALSE(verified.ok());
  EXPECT_THAT(verified.status().message(), HasSubstr("packed weights checksum mismatch"));
  runtime.setVerifyPackedWeights(false);
  const ir::Value& bias = plan.graph->value(plan.graph->findValue("bias"));
  const size_t biasOffset =
      static_cast<size_t>(static_cast<const uint8_t*>(bias.constant->raw()) - file);
  EXPECT_LT(biasOffset, tableOffset);
  std::vector<char> biasDamaged = readBytes(planPath);
  biasDamaged[biasOffset] ^= 1;
  writeBytes(damaged, biasDamaged);
  auto mapped = runtime.deserializeEngineFromFile(damaged);
  ASSERT_FALSE(mapped.ok());
  EXPECT_THAT(mapped.status().message(), HasSubstr("plan checksum mismatch"));
}

}  // namespace
}  // namespace kiln
