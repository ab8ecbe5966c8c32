// Checks the builder config's optimization profiles against a network's inputs and completes
// them: every input gets min/opt/max dims (fixed inputs their own dims).
#pragma once
#include <map>
#include <vector>

#include "engine/plan_format.h"
#include "ir/graph.h"
#include "kiln/builder.h"

namespace kiln::build {

/// Throws kiln::Error (kInvalidArgument) naming the profile, input, index and values at fault.
std::vector<plan::Profile> resolveProfiles(const ir::Graph& graph, const BuilderConfig& config);

/// The shapes of one selector (min/opt/max) of a profile, by input value id.
std::map<int, Shape> profileShapes(const ir::Graph& graph, const plan::Profile& profile,
                                   OptProfileSelector which);

}  // namespace kiln::build
