#include "core/tensor_limits.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace kiln {

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  return bytes;
}

namespace {
std::atomic<uint64_t> tensorLimit{0};  // 0: physical memory
}  // namespace

uint64_t tensorByteLimit() {
  const uint64_t limit = tensorLimit.load(std::memory_order_relaxed);
  return limit ? limit : physicalMemoryBytes();
}

void setTensorByteLimit(uint64_t bytes) { tensorLimit.store(std::min(bytes, physicalMemoryBytes()), std::memory_order_relaxed); }

}  // namespace kiln
