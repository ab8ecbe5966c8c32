// Builds an engine plan (bytes, or a .kiln file) from a network, as TensorRT's IBuilder does.
//
//   StderrLogger logger;
//   auto builder = createBuilder(logger);
//   auto network = builder->createNetwork();
//   ... add layers, or OnnxParser(*network, logger).parseFromFile("model.onnx") ...
//   BuilderConfig config;
//   OptimizationProfile profile;
//   profile.setDimensions("x", OptProfileSelector::kMIN, {1, 3, 224, 224});
//   profile.setDimensions("x", OptProfileSelector::kOPT, {4, 3, 224, 224});
//   profile.setDimensions("x", OptProfileSelector::kMAX, {8, 3, 224, 224});
//   config.addOptimizationProfile(profile);
//   Result<std::vector<uint8_t>> plan = builder->buildSerializedNetwork(*network, config);
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/calibrator.h"
#include "kiln/export.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/optimization_profile.h"
#include "kiln/status.h"
#include "kiln/timing_cache.h"

namespace kiln {

enum class BuilderFlag : uint32_t {
  kFP16 =
      1u << 0,  // allow FP16 layers (accepted and checked; FP16 kernels are not implemented yet)
  kINT8 = 1u << 1,  // allow INT8 layers: with a calibrator (setInt8Calibrator), Conv/MatMul/Gemm
                    // are quantized
  kDISABLE_NCHWC_LAYOUT =
      1u << 2,  // keep every tensor NCHW: no blocked-layout convolutions (to compare)
  // Precision (docs/precision.md): kBF16 runs Conv, MatMul, Gemm and their fused forms in BF16
  // with FP32 sums where the CPU has AVX512_BF16 (else a warning and FP32); the constraint flags
  // make ILayer::setPrecision binding (kOBEY: an error when it cannot be met) or a preference.
  kBF16 = 1u << 3,
  kOBEY_PRECISION_CONSTRAINTS = 1u << 4,
  kPREFER_PRECISION_CONSTRAINTS = 1u << 5,
};

class KILN_API BuilderConfig {
 public:
  /// Largest activation arena the engine may need at the profiles' max shapes; 0 = no limit.
  void setMemoryPoolLimit(uint64_t bytes) { workspaceBytes_ = bytes; }
  uint64_t getMemoryPoolLimit() const { return workspaceBytes_; }
  /// The largest single buffer the build may need (a tensor at the profiles' shapes, constant
  /// folding's); a profile whose shapes need more fails naming the tensor. 0 = the default, 90 %
  /// of this machine's physical memory; any other value replaces it, above the default too.
  void setAllocationLimit(uint64_t bytes) { allocationLimit_ = bytes; }
  uint64_t getAllocationLimit() const { return allocationLimit_; }
  /// Intra-op threads for contexts of the engine; 0 = one per hardware thread.
  void setThreads(int threads) { threads_ = threads; }
  int getThreads() const { return threads_; }
  void setFlag(BuilderFlag flag) { flags_ |= static_cast<uint32_t>(flag); }
  void clearFlag(BuilderFlag flag) { flags_ &= ~static_cast<uint32_t>(flag); }
  bool getFlag(BuilderFlag flag) const { return (flags_ & static_cast<uint32_t>(flag)) != 0; }
  uint32_t getFlags() const { return flags_; }
  /// Returns the profile's index.
  int addOptimizationProfile(const OptimizationProfile& profile);
  int getNbOptimizationProfiles() const { return static_cast<int>(profiles_.size()); }
  const OptimizationProfile& getOptimizationProfile(int index) const {
    return profiles_.at(static_cast<size_t>(index));
  }
  /// With BuilderFlag::kINT8: the calibrator whose batches (or cache) give the activation ranges of
  /// the quantized layers (kiln/calibrator.h). Not owned; it must outlive the build.
  void setInt8Calibrator(IInt8Calibrator* calibrator) { calibrator_ = calibrator; }
  IInt8Calibrator* getInt8Calibrator() const { return calibrator_; }
  /// How hard the builder looks for fast kernels (trtexec's --builderOptimizationLevel), 0..5:
  /// 0 takes the heuristics' kernel for every layer (no timing; what Session uses); 1 and more
  /// time every candidate kernel of each convolution, GEMM / MatMul and attention layer at the
  /// first profile's opt shapes and keep the fastest, with more timed runs per candidate at higher
  /// levels (median of 3, 5, 7, 11, 15) and, from 3, the any-dtype kernels timed too. A value
  /// outside 0..5 fails the build.
  void setBuilderOptimizationLevel(int level) { optimizationLevel_ = level; }
  int getBuilderOptimizationLevel() const { return optimizationLevel_; }
  /// Times of earlier builds to use, and to add this build's to (not owned; may be shared by
  /// several builds, one at a time). Null: time every tactic.
  void setTimingCache(ITimingCache* cache) { timingCache_ = cache; }
  ITimingCache* getTimingCache() const { return timingCache_; }

 private:
  uint64_t workspaceBytes_ = 0;
  uint64_t allocationLimit_ = 0;
  int threads_ = 0;
  uint32_t flags_ = 0;
  std::vector<OptimizationProfile> profiles_;
  IInt8Calibrator* calibrator_ = nullptr;
  int optimizationLevel_ = 3;
  ITimingCache* timingCache_ = nullptr;
};

/// What a build did, stage by stage (also logged at kINFO; per-layer decisions at kVERBOSE).
struct BuildReport {
  struct Stage {
    std::string name;  // "optimize", "select kernels", "plan memory", "serialize"
    double milliseconds = 0;
    std::string summary;
  };
  std::vector<Stage> stages;
  int layersBefore = 0;     // nodes in the network
  int layersAfter = 0;      // nodes left after constant folding, dead-node removal and fusion
  uint64_t arenaBytes = 0;  // arena holding the intermediate tensors at the opt shapes of profile 0
  uint64_t intermediateBytes = 0;  // those intermediate tensors' sizes added up (without the reuse)
  uint64_t maxArenaBytes = 0;      // the arena at the max shapes of the profiles
  uint64_t planBytes = 0;
  std::vector<std::string> layerDecisions;  // one line per layer of the engine
  /// INT8 calibration: one line per quantized tensor, its range, scale and zero point.
  std::vector<std::string> quantizedTensors;
  int tacticLayersTimed = 0;      // layers whose candidates were timed
  int tacticLayersFromCache = 0;  // layers chosen from the timing cache alone (nothing timed)
  int64_t tacticRuns = 0;         // kernel runs made to time them (warm-up included)
};

class KILN_API Builder {
 public:
  explicit Builder(ILogger& logger) : logger_(logger) {}
  std::unique_ptr<NetworkDefinition> createNetwork() {
    return std::make_unique<NetworkDefinition>(logger_);
  }

  /// Optimizes the network, checks it over every optimization profile, chooses kernels and
  /// serializes the engine. The network is not modified.
  Result<std::vector<uint8_t>> buildSerializedNetwork(const NetworkDefinition& network,
                                                      const BuilderConfig& config,
                                                      BuildReport* report = nullptr);

 private:
  ILogger& logger_;
};

inline std::unique_ptr<Builder> createBuilder(ILogger& logger) {
  return std::make_unique<Builder>(logger);
}

}  // namespace kiln
