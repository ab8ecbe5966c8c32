#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

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

constexpr auto kSpinBeforeSleep = std::chrono::microseconds(300);

uint64_t generationOf(uint64_t claim) { return claim >> 32; }

ThreadPool::ThreadPool(int threads) {
  int total = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < total; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::runBlocks(uint64_t generation) {
  for (;;) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    if (generationOf(claim) != generation) return;
    // Read the job before claiming: a successful claim proves these are still this job's fields.
    const auto* fn = job_.load(std::memory_order_relaxed);
    const int64_t n = jobSize_.load(std::memory_order_relaxed), parts = blocks_.load(std::memory_order_relaxed);
    const int64_t block = static_cast<int64_t>(claim & 0xffffffffu);
    if (block >= parts) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    auto [begin, end] = blockOf(n, static_cast<int>(parts), static_cast<int>(block));
    if (begin < end) (*fn)(begin, end);
    finished_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::workerLoop() {
  uint64_t done = 0;  // the last generation this worker ran out of blocks in
  for (;;) {
    auto spinUntil = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    uint64_t generation = generationOf(claim_.load(std::memory_order_acquire));
    for (int spins = 0; generation == done && !stopping_.load(std::memory_order_relaxed); ++spins) {
      if ((spins & 63) == 0 && std::chrono::steady_clock::now() > spinUntil) {
        std::unique_lock<std::mutex> lock(sleepMutex_);
        wake_.wait(lock, [&] { return stopping_ || generationOf(claim_.load()) != done; });
      }
      generation = generationOf(claim_.load(std::memory_order_acquire));
    }
    if (stopping_) return;
    runBlocks(generation);
    done = generation;
  }
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t maxParts) {
  if (n <= 0) return;
  const int64_t parts = std::min<int64_t>({n, size(), maxParts > 0 ? maxParts : n});
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  // A nested call (a kernel's loop body calling sgemm, say) finds the pool busy and runs inline.
  std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
  if (!busy.owns_lock()) {
    fn(0, n);
    return;
  }
  job_.store(&fn, std::memory_order_relaxed);
  jobSize_.store(n, std::memory_order_relaxed);
  blocks_.store(parts, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generationOf(claim_.load(std::memory_order_relaxed)) + 1;
  {
    // Publishing under the sleep mutex means a worker deciding to sleep cannot miss the job.
    std::lock_guard<std::mutex> lock(sleepMutex_);
    claim_.store(generation << 32, std::memory_order_release);
  }
  wake_.notify_all();
  runBlocks(generation);
  while (finished_.load(std::memory_order_acquire) < parts) std::this_thread::yield();
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

void parallelForAtLeast(int64_t n, int64_t minPerThread, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool* pool = currentThreadPool();
  const int64_t parts = minPerThread > 0 ? n / minPerThread : n;
  if (pool && parts >= 2) {
    pool->parallelFor(n, fn, parts);
  } else if (n > 0) {
    fn(0, n);
  }
}

}  // namespace kiln::cpu
