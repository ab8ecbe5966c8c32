#include "core/tensor_limits.h"

#include <unistd.h>

#include "kiln/error.h"

namespace kiln {

namespace {
thread_local uint64_t tlsLimit = 0;  // 0: defaultAllocationLimitBytes()
}  // namespace

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  return bytes;
}

uint64_t defaultAllocationLimitBytes() { return physicalMemoryBytes() / 10 * 9; }

uint64_t allocationLimitBytes() { return tlsLimit ? tlsLimit : defaultAllocationLimitBytes(); }

AllocationLimitScope::AllocationLimitScope(uint64_t bytes) : previous_(tlsLimit) {
  if (bytes) tlsLimit = bytes;
}

AllocationLimitScope::~AllocationLimitScope() { tlsLimit = previous_; }

std::string byteCountText(uint64_t bytes) {
  return bytes < (uint64_t{10} << 20) ? std::to_string(bytes) + " bytes"
                                      : std::to_string(bytes >> 20) + " MiB";
}

std::string allocationLimitText() {
  const std::string limit = byteCountText(allocationLimitBytes());
  return tlsLimit
             ? "over the allocation limit of " + limit
             : "over the default allocation limit of " + limit + " (90 % of this machine's memory)";
}

void refuseAllocation(uint64_t bytes, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument,
              what + " needs " + byteCountText(bytes) + ", " + allocationLimitText());
}

}  // namespace kiln
