// The .kiln plan file: what a built engine holds, and its reader and writer. The byte layout is
// documented in docs/plan-format.md. Reading validates every size and offset: a bad file is a
// kiln::Error (kInvalidPlan), never a crash.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/engine.h"

namespace kiln::plan {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
// 2: layers hold their kernel id, ISA, declined candidates, packed state; 3: the packed state's
// blobs have a section of their own, last in the file, with its own checksum; 4: large float
// constants lie in that section too (tensor records say where their bytes are); 5: the build
// info holds the builder optimization level, layers how their kernel was chosen and the timed
// tactics.
constexpr uint32_t kFormatVersion = 5;
constexpr size_t kHeaderSize = 64;
constexpr size_t kChecksumOffset = 60;
constexpr size_t kFormatVersionOffset = 8;
constexpr size_t kWeightAlignment = 64;
/// Where a tensor record's bytes are.
enum class TensorStorage : uint8_t {
  kWeights = 0,  // the weights section, under the header checksum
  /// The packed section, under its own checksum (checked on request, docs/plan-format.md): float
  /// constants of more than kMaxShapeValueElements elements, which only arithmetic reads. No
  /// shape is computed from them at build or load: shape-determining float inputs (Resize
  /// scales, Range bounds) have at most a few elements per dim of a rank <= 64.
  kPacked = 1,
  /// Left out: every reader's kernel keeps its own packed copy, stored with the layer (only the
  /// constant's dtype and shape are read).
  kNone = 2,
};
/// Float constants above this many elements go to the packed section (ShapeProgram's limit on
/// what a shape value holds).
constexpr int64_t kLargestShapeLikeConstant = 4096;
constexpr const char* kKilnVersion = "0.1.0";

enum SectionId : uint32_t {
  kBuildInfoSection = 1,
  kIOSection = 2,
  kProfilesSection = 3,
  kGraphSection = 4,
  kLayersSection = 5,
  kWeightsSection = 6,
  kPluginsSection = 7,  // only in plans with plugin nodes
  kPackedSection = 8,   // the kernels' packed blobs; last in the file
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
KILN_INTERNAL_API uint32_t detectCpuFeatures();
/// "avx2 fma f16c" (unknown bits as "bit31").
KILN_INTERNAL_API std::string cpuFeatureNames(uint32_t features);

struct IOTensor {
  std::string name;
  TensorIOMode mode = TensorIOMode::kNONE;
  DataType dtype = DataType::kUndefined;
  bool hasShape = false;
  Shape dims;               // -1 where dynamic
  bool hasDefault = false;  // an input with a default value
  int valueId = -1;         // in the graph
};

struct ProfileEntry {
  std::string input;
  Shape dims[3];                   // min, opt, max
  std::vector<int64_t> values[3];  // for shape inputs; empty otherwise
};

struct KILN_INTERNAL_API Profile {
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

KILN_INTERNAL_API std::vector<uint8_t> writePlan(const Plan& plan);
/// Parses and validates a plan; hostFeatures is the machine's (detectCpuFeatures() by default).
/// With `owner` (what keeps `data` alive, a memory-mapped file), constants view their bytes in
/// place instead of copying them; without, they are copied.
/// The header checksum covers every byte but the packed blobs (numbers in a kernel's layout, read
/// by nothing but arithmetic), which have a checksum of their own: kVerify checks it too, reading
/// the whole file; kSkip leaves those pages untouched until the kernels use them.
enum class PackedCheck { kSkip, kVerify };
KILN_INTERNAL_API Plan readPlan(const void* data, size_t size,
                                uint32_t hostFeatures = detectCpuFeatures(),
                                std::shared_ptr<const void> owner = nullptr,
                                PackedCheck packedCheck = PackedCheck::kVerify);
/// The header checksum: CRC-32C of bytes [0, 60) and [64, packedOffset), everything before the
/// packed section but the checksum itself.
KILN_INTERNAL_API uint32_t headerChecksum(const uint8_t* plan, uint64_t packedOffset);
/// Writes the header checksum into a written plan of at least 64 bytes (the writer, and tests
/// that edit a plan's bytes; with a damaged section table, whatever its entries say).
KILN_INTERNAL_API void signPlan(std::vector<uint8_t>& plan);
/// True when the bytes start with the plan magic.
KILN_INTERNAL_API bool looksLikePlan(const void* data, size_t size);

}  // namespace kiln::plan
