// The intra-op thread pool: persistent workers that split a loop with the calling thread.
// A context (Session, ExecutionContext) owns one and makes it current while it runs; kernels
// reach it through currentThreadPool(), so the kernel interface needs no extra argument.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::cpu {

class ThreadPool {
 public:
  /// threads = total threads including the caller; 0 means one per hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) on disjoint ranges covering [0, n), in equal contiguous blocks, one per
  /// thread; returns when all are done. If another caller is using the pool, runs inline.
  void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one parallelFor at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t jobSize_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

/// The pool of the context running on this thread, or nullptr (then kernels run serially).
ThreadPool* currentThreadPool();

/// Makes a pool current on this thread for its lifetime.
class ThreadPoolScope {
 public:
  explicit ThreadPoolScope(ThreadPool* pool);
  ~ThreadPoolScope();

 private:
  ThreadPool* previous_;
};

/// Splits [0, n) over the current pool when there is one and the work is worth it.
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace kiln::cpu
