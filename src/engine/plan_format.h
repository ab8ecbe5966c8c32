// The .kiln plan file: what a built engine holds, and its reader and writer. The byte layout is
// documented in docs/plan-format.md. Reading validates every size and offset: a bad file is a
// kiln::Error (kInvalidPlan), never a crash.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "ir/graph.h"
#include "kiln/engine.h"

namespace kiln::plan {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
constexpr uint32_t kFormatVersion = 2;  // 2: layers hold their kernel id, ISA, declined candidates, packed state
constexpr size_t kHeaderSize = 64;
constexpr size_t kChecksumOffset = 60;
constexpr size_t kFormatVersionOffset = 8;
constexpr size_t kWeightAlignment = 64;
/// The weight offset of a constant whose values the plan leaves out: every reader's kernel
/// keeps its own packed copy, stored with the layer (only its dtype and shape are read).
constexpr uint64_t kNoWeights = ~uint64_t{0};
constexpr const char* kKilnVersion = "0.1.0";

enum SectionId : uint32_t {
  kBuildInfoSection = 1,
  kIOSection = 2,
  kProfilesSection = 3,
  kGraphSection = 4,
  kLayersSection = 5,
  kWeightsSection = 6,
  kPluginsSection = 7,  // only in plans with plugin nodes
};

/// CPU features a plan may require (bit set in the header).
enum CpuFeature : uint32_t {
  kAvx2 = 1u << 0,
  kFma = 1u << 1,
  kF16c = 1u << 2,
  kAvx512f = 1u << 3,  // with VL, BW and DQ (cpu::CpuIsa::kAvx512)
  kAvxVnni = 1u << 4,
  kAvx512Vnni = 1u << 5,
  kAvx512Bf16 = 1u << 6,
  kAvx512Fp16 = 1u << 7,
};
/// What kiln's kernels are compiled for (docs/design.md: the AVX2 + FMA + F16C baseline).
constexpr uint32_t kBaselineCpuFeatures = kAvx2 | kFma | kF16c;
uint32_t detectCpuFeatures();
/// "avx2 fma f16c" (unknown bits as "bit31").
std::string cpuFeatureNames(uint32_t features);

struct IOTensor {
  std::string name;
  TensorIOMode mode = TensorIOMode::kNONE;
  DataType dtype = DataType::kUndefined;
  bool hasShape = false;
  Dims dims;               // -1 where dynamic
  bool hasDefault = false;  // an input with a default value
  int valueId = -1;        // in the graph
};

struct ProfileEntry {
  std::string input;
  Dims dims[3];                       // min, opt, max
  std::vector<int64_t> values[3];     // for shape inputs; empty otherwise
};

struct Profile {
  std::vector<ProfileEntry> entries;  // one per graph input
  const ProfileEntry* find(const std::string& input) const;
};

struct Plan {
  PlanInfo info;
  uint32_t cpuFeatures = kBaselineCpuFeatures;
  std::vector<IOTensor> io;  // inputs then outputs
  std::vector<Profile> profiles;
  std::shared_ptr<ir::Graph> graph;
  std::vector<LayerInfo> layers;  // one per graph node, same order
  /// Per layer: its kernel's packed state (empty when it keeps none); read back, the blobs view
  /// the plan's bytes.
  std::vector<cpu::KernelState> kernelStates;
};

std::vector<uint8_t> writePlan(const Plan& plan);
/// Parses and validates a plan; hostFeatures is the machine's (detectCpuFeatures() by default).
/// With `owner` (what keeps `data` alive, a memory-mapped file), constants view their bytes in
/// place instead of copying them; without, they are copied.
Plan readPlan(const void* data, size_t size, uint32_t hostFeatures = detectCpuFeatures(),
              std::shared_ptr<const void> owner = nullptr);
/// True when the bytes start with the plan magic.
bool looksLikePlan(const void* data, size_t size);

}  // namespace kiln::plan
