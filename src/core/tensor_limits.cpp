#include "core/tensor_limits.h"

#include <unistd.h>

namespace kiln {

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  return bytes;
}

}  // namespace kiln
