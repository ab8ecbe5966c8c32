// Limits every layer applies to tensors it is told about (models, plans, inputs), so that a
// nonsensical declaration fails with a message instead of an allocation the size of its claim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include "core/internal_api.h"

namespace kiln {

/// The most dimensions a kiln tensor may have (numpy's limit too).
constexpr size_t kMaxTensorRank = 64;

/// This machine's physical memory in bytes.
KILN_INTERNAL_API uint64_t physicalMemoryBytes();

/// The limit in force where nobody set one: 90 % of physicalMemoryBytes(), so that a buffer the
/// machine could hold only by evicting everything else is refused with a message rather than
/// left to the OOM killer. Physical memory, not MemAvailable: the same model and shapes then pass
/// or fail the same way whatever else the machine is doing.
KILN_INTERNAL_API uint64_t defaultAllocationLimitBytes();

/// The largest single buffer kiln allocates (a tensor, the activation arena, a kernel workspace)
/// on this thread: the innermost AllocationLimitScope's, else defaultAllocationLimitBytes().
KILN_INTERNAL_API uint64_t allocationLimitBytes();

/// Sets allocationLimitBytes() on the calling thread for the scope's lifetime (0: keeps the limit
/// in force). Any other value replaces it, above the default too (a machine with swap). Sessions,
/// execution contexts and builds open one over their work (SessionOptions::allocationLimitBytes,
/// ExecutionContext::setAllocationLimit, BuilderConfig::setAllocationLimit, the CLI's
/// --memory-limit).
class KILN_INTERNAL_API AllocationLimitScope {
 public:
  explicit AllocationLimitScope(uint64_t bytes);
  ~AllocationLimitScope();
  AllocationLimitScope(const AllocationLimitScope&) = delete;
  AllocationLimitScope& operator=(const AllocationLimitScope&) = delete;

 private:
  uint64_t previous_;
};

/// "N bytes" below 10 MiB, else "N MiB" (rounded down).
KILN_INTERNAL_API std::string byteCountText(uint64_t bytes);

/// "over the allocation limit of L", or "over the default allocation limit of L (90 % of this
/// machine's memory)" when no scope set one: what a refusal says of the limit.
KILN_INTERNAL_API std::string allocationLimitText();

/// Throws kiln::Error (kInvalidArgument) "WHAT needs " + byteCountText(bytes) + ", " +
/// allocationLimitText(); `what` names the buffer.
[[noreturn]] KILN_INTERNAL_API void refuseAllocation(uint64_t bytes, const std::string& what);

/// refuseAllocation(bytes, describe()) when `bytes` exceeds allocationLimitBytes(). The buffer's
/// name is made only then: allocations that fit (every tensor a run makes) build no string.
template <typename Describe>
void checkAllocation(uint64_t bytes, Describe&& describe) {
  if (bytes > allocationLimitBytes()) refuseAllocation(bytes, describe());
}

}  // namespace kiln
