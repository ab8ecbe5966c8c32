// kiln::parallelFor (include/kiln/plugin.h): plugins share the intra-op thread pool of the
// execution context that runs them, without seeing the pool itself.
#include "backends/cpu/thread_pool.h"
#include "kiln/plugin.h"

namespace kiln {

void parallelFor(int64_t count, const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (count > 0) cpu::parallelFor(count, fn);
}

}  // namespace kiln
