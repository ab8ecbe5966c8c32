// The data cache sizes this CPU reports, for kernels that size their blocking from them instead
// of from a constant measured on one CPU.
#pragma once
#include <cstdint>

namespace kiln::cpu {

struct CpuCacheSizes {
  int64_t l1dBytes;  // per core
  int64_t l2Bytes;   // per core
};

/// The sizes the OS reports (sysconf), read once; 32 KiB and 1 MiB where it reports none.
const CpuCacheSizes& cpuCacheSizes();

}  // namespace kiln::cpu
