// The intra-op thread pool: persistent workers that split a loop with the calling thread.
// A context (Session, ExecutionContext) owns one and makes it current while it runs; kernels
// reach it through currentThreadPool(), so the kernel interface needs no extra argument.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include "core/internal_api.h"

namespace kiln::cpu {

class KILN_INTERNAL_API ThreadPool {
 public:
  /// threads = total threads including the caller; 0 means one per hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) on disjoint ranges covering [0, n), in equal contiguous blocks, one per
  /// thread; returns when all are done. If another caller is using the pool, runs inline.
  /// Blocks are claimed, not assigned: a thread that is late to wake (the machine is busy) does
  /// not hold the others up, whoever is free takes its block.
  /// maxParts > 0 caps the number of blocks (so small loops use fewer threads).
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                   int64_t maxParts = 0);

  /// Marks an inference in progress (ThreadPoolScope calls these): beginRun wakes sleeping workers
  /// at once, so that they are up by the first layer, and until the matching endRun they spin
  /// between jobs instead of sleeping (a futex wake-up costs tens of microseconds per layer).
  /// After the last endRun they spin a short while more (back-to-back runs), then sleep.
  void beginRun();
  void endRun();

  /// Workers blocked on the condition variable now (for tests and diagnostics).
  int sleepingWorkers() const { return sleeping_.load(std::memory_order_relaxed); }

 private:
  void stopWorkers();
  void workerLoop();
  /// Runs blocks of job `generation` until none is left unclaimed.
  void runBlocks(uint64_t generation);
  /// Confines the workers to the calling thread's CPUs other than the one it runs on, when it may
  /// use enough of them; see the .cpp for why.
  void keepWorkersOffCallerCpu();

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one parallelFor at a time
  // The current job. `claim_` packs the job's generation (high 32 bits) with the next unclaimed
  // block (low 32 bits), so a thread can only claim a block of the job it read the fields of.
  std::atomic<uint64_t> claim_{0};
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_{nullptr};
  std::atomic<int64_t> jobSize_{0};
  std::atomic<int64_t> blocks_{0};
  std::atomic<int64_t> finished_{0};
  // Workers spin a short while for the next job (kernels come back to back), then sleep here.
  std::mutex sleepMutex_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> activeRuns_{0};  // beginRun minus endRun
  std::atomic<int> sleeping_{0};
  std::mutex affinityMutex_;
  std::atomic<int> workersAvoidCpu_{-1};  // the CPU the workers' affinity leaves out, -1 if none
};

/// The pool of the context running on this thread, or nullptr (then kernels run serially).
KILN_INTERNAL_API ThreadPool* currentThreadPool();

/// Makes a pool current on this thread for its lifetime, and keeps its workers awake meanwhile
/// (ThreadPool::beginRun / endRun); a null pool makes kernels run serially.
class KILN_INTERNAL_API ThreadPoolScope {
 public:
  explicit ThreadPoolScope(ThreadPool* pool);
  ~ThreadPoolScope();

 private:
  ThreadPool* previous_;
};

/// Threads of the current pool (1 without one): what kernels size their per-thread scratch for.
KILN_INTERNAL_API int poolThreads();

/// Splits [0, items) into min(threads, items) equal contiguous parts and calls fn(part, begin,
/// end) for each, over the current pool when there is more than one part: `part` indexes the
/// caller's per-thread scratch (sized for `threads`, normally poolThreads()).
KILN_INTERNAL_API void forEachThreadPart(int64_t items, int threads,
                                         const std::function<void(int64_t, int64_t, int64_t)>& fn);

/// Splits [0, n) over the current pool when there is one and the work is worth it.
KILN_INTERNAL_API void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

/// parallelFor that gives each thread at least `minPerThread` items, so loops too small to pay
/// for a dispatch (a few microseconds) run inline on the caller.
KILN_INTERNAL_API void parallelForAtLeast(int64_t n, int64_t minPerThread,
                                          const std::function<void(int64_t, int64_t)>& fn);

/// Items per thread below which the memory-bound elementwise and copy kernels stay serial: about
/// 10 microseconds of work, several times the pool's dispatch cost (BM_ParallelForOverhead).
constexpr int64_t kMinElementsPerThread = 16384;

}  // namespace kiln::cpu
