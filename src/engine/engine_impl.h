// What an Engine holds: the plan's contents plus the kernels made from it. Immutable after
// loading, so contexts on many threads share it.
#pragma once
#include <memory>

#include "engine/executor.h"
#include "engine/plan_format.h"
#include "kiln/engine.h"

namespace kiln {

struct Engine::Impl {
  plan::Plan plan;
  std::unique_ptr<Executor> executor;

  /// Index into plan.io, or -1.
  int findIO(const std::string& name) const;
};

/// Loads a validated plan: makes the kernels (fails listing unsupported nodes).
std::shared_ptr<const Engine::Impl> loadEngine(plan::Plan plan);

}  // namespace kiln
