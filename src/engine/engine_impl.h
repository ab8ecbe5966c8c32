// What an Engine holds: the plan's contents plus the kernels made from it. Immutable after
// loading, so contexts on many threads share it.
#pragma once
#include <memory>

#include "core/internal_api.h"
#include "engine/executor.h"
#include "engine/plan_format.h"
#include "kiln/engine.h"

namespace kiln {

struct Engine::Impl {
  plan::Plan plan;
  std::shared_ptr<const void> mapping;  // the plan file, mapped, when loaded from one
  std::unique_ptr<Executor> executor;

  /// Index into plan.io, or -1.
  int findIO(const std::string& name) const;
};

/// The whole plan file mapped private (copy-on-write; nothing writes to it), unmapped with its
/// last owner; `size` receives the file's size. Throws kIoError naming the path.
KILN_INTERNAL_API std::shared_ptr<const void> mapPlanFile(const std::string& path, size_t& size);

/// Loads a validated plan: makes the kernels it names (fails naming the layer when one cannot be
/// made). `mapping`, when the plan was read from a mapped file, is kept while the engine lives.
KILN_INTERNAL_API std::shared_ptr<const Engine::Impl> loadEngine(
    plan::Plan plan, std::shared_ptr<const void> mapping = nullptr);

/// An engine over kernels a build just made for `plan`'s graph (a Session's: nothing serialized).
KILN_INTERNAL_API std::shared_ptr<const Engine::Impl> engineFromKernels(
    plan::Plan plan, std::unique_ptr<Executor> kernels);

}  // namespace kiln
