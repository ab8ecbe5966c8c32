// The current thread pool of a test: `threads` threads in all (the caller and threads - 1
// workers), or none when threads is 1, for as long as the object lives.
#pragma once
#include "backends/cpu/thread_pool.h"

namespace kiln::testing {

class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : pool_(threads), scope_(threads > 1 ? &pool_ : nullptr) {}

 private:
  cpu::ThreadPool pool_;
  cpu::ThreadPoolScope scope_;
};

}  // namespace kiln::testing
