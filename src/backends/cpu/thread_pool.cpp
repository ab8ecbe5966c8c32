#include "backends/cpu/thread_pool.h"

#include <algorithm>

namespace kiln::cpu {

namespace {
thread_local ThreadPool* tlsPool = nullptr;

// Block t of `parts` equal blocks of [0, n).
std::pair<int64_t, int64_t> blockOf(int64_t n, int parts, int t) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = t * base + std::min<int64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  int total = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < total; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = jobSize_;
    }
    auto [begin, end] = blockOf(n, size(), index);
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (workers_.empty() || n == 1 || !busy.owns_lock()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    jobSize_ = n;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  auto [begin, end] = blockOf(n, size(), 0);
  if (begin < end) fn(begin, end);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

ThreadPool* currentThreadPool() { return tlsPool; }

ThreadPoolScope::ThreadPoolScope(ThreadPool* pool) : previous_(tlsPool) { tlsPool = pool; }
ThreadPoolScope::~ThreadPoolScope() { tlsPool = previous_; }

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (ThreadPool* pool = currentThreadPool()) {
    pool->parallelFor(n, fn);
  } else {
    fn(0, n);
  }
}

}  // namespace kiln::cpu
