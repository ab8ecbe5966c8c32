// The build up to an engine in memory: optimize -> select kernels -> check the profiles' shapes
// and memory. Builder::buildSerializedNetwork serializes what it makes; a Session runs it as it is,
// so that both workflows share one path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "build/network_impl.h"
#include "engine/executor.h"
#include "engine/plan_format.h"
#include "kiln/builder.h"

namespace kiln::build {

struct CompileOptions {
  /// Fold constants, remove unused nodes and fuse layers; false runs the graph as given.
  bool optimize = true;
  Executor::KernelPolicy kernelPolicy = Executor::KernelPolicy::kFirstSupporting;
  /// No optimization profile (a Session): dynamic dims take any size at run time, where each new
  /// shape is inferred and planned; the build skips the per-profile shape and memory checks.
  bool unboundedShapes = false;
  /// For an engine that runs without being serialized: a weight that every reader's kernel keeps a
  /// packed copy of is freed from the graph as soon as its last reader is made (never held twice).
  bool freeCopiedWeights = false;
};

/// An engine's contents: the plan (all but the kernels' packed states, which the kernels hold)
/// and the kernels made for its graph.
struct CompiledNetwork {
  plan::Plan plan;
  std::unique_ptr<Executor> kernels;
};

/// Builds `graph` (moved in: it becomes the engine's); `layers` are the network's layer records
/// over it (output types, precision constraints; empty for a model a Session loaded), `source`
/// names the model in the plan. Throws kiln::Error naming what is at fault.
CompiledNetwork compileNetwork(ir::Graph graph, const std::vector<LayerRecord>& layers,
                               const std::string& source, const BuilderConfig& config,
                               const CompileOptions& options, ILogger& logger, BuildReport& report);

}  // namespace kiln::build
