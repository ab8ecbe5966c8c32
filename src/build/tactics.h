// Tactic selection (TensorRT's tactics): for each convolution, GEMM / MatMul and attention layer
// whose family has more than one candidate that can run it, the builder times every such
// candidate on the layer's opt shapes at the engine's thread count and keeps the fastest; the
// times and the winner go in the plan (LayerInfo::tactics), so a loaded plan makes the recorded
// kernel without timing. A timing cache (kiln/timing_cache.h) answers for layers timed before.
// Optimization level 0 times nothing: the heuristics' choice (KernelRegistry::select) stands.
#pragma once
#include <string>
#include <vector>

#include "engine/plan_format.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/engine.h"
#include "kiln/logger.h"
#include "kiln/timing_cache.h"

namespace kiln::build {

/// How many timed runs of each candidate a level asks for (after one warm-up run), the median
/// of which is its time; 0 at level 0.
int tacticRepeats(int level);

/// What tactic selection decided for one node.
struct LayerTactics {
  std::string kernel;                 // the winner's id; "" when not timed (the heuristics choose)
  std::vector<TacticTiming> timings;  // every candidate, timed or declined, in list order
  std::string source;                 // "timed", "timing cache", or "" when not timed
};

struct TacticOptions {
  int level = 3;
  int threads = 1;
  ITimingCache* cache = nullptr;  // may be null
};

/// Chooses the tactics of `graph`'s nodes at the profile's opt shapes; one entry per node.
/// Counts what it did in `report` (tacticLayersTimed, tacticLayersFromCache, tacticRuns).
std::vector<LayerTactics> selectTactics(const ir::Graph& graph, const plan::Profile& profile,
                                        const TacticOptions& options, ILogger& logger,
                                        BuildReport& report);

/// The cache key of one candidate on one node of the graph at opt shapes (`concrete`): CPU, kiln
/// version, threads, then the layer signature (domain::op, opset, per input its dtype and shape,
/// attributes) and the candidate's id.
std::string tacticKey(const ir::Graph& concrete, const ir::Node& node, int threads,
                      const std::string& kernel);

}  // namespace kiln::build
