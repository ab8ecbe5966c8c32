#include "backends/cpu/cpu_caches.h"

#include <unistd.h>

namespace kiln::cpu {
namespace {

int64_t reported(int name, int64_t fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? static_cast<int64_t>(bytes) : fallback;
}

}  // namespace

const CpuCacheSizes& cpuCacheSizes() {
  static const CpuCacheSizes sizes{reported(_SC_LEVEL1_DCACHE_SIZE, int64_t{32} << 10),
                                   reported(_SC_LEVEL2_CACHE_SIZE, int64_t{1} << 20)};
  return sizes;
}

}  // namespace kiln::cpu
