#include "memory_limit_option.h"

#include "core/tensor_limits.h"

namespace kiln::cli {

void addMemoryLimitOption(CLI::App* cmd, double* mib, const std::string& what) {
  *mib = kMemoryLimitNotGiven;
  cmd->add_option("--memory-limit", *mib,
                  "MiB: " + what +
                      "; more fails naming it (default: 90% of this machine's memory; 0 = all of "
                      "it)")
      ->check(CLI::NonNegativeNumber);
}

uint64_t memoryLimitBytes(double mib) {
  if (mib < 0) return 0;
  if (mib == 0) return physicalMemoryBytes();
  return static_cast<uint64_t>(mib * (1 << 20));
}

}  // namespace kiln::cli
