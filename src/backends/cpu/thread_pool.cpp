#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "kiln/error.h"

namespace kiln::cpu {

namespace {
thread_local ThreadPool* tlsPool = nullptr;

// Block t of `parts` equal blocks of [0, n).
std::pair<int64_t, int64_t> blockOf(int64_t n, int parts, int t) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = t * base + std::min<int64_t>(t, extra);
  return {begin, begin + base + (t < extra ? 1 : 0)};
}

// One step of a spin-wait: the pause instruction lets the core idle a few dozen cycles
// instead of hammering the cache line, without giving the core away as yield() does.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

// How long an idle worker spins outside a run (after the last job or the end of a run) before it
// sleeps: covers back-to-back runs and a caller's short pauses; an idle pool sleeps after that.
constexpr auto kSpinBeforeSleep = std::chrono::milliseconds(1);
// How long the caller spins with pause for the blocks other threads are running, before it
// yields its core (the machine is oversubscribed and a worker was preempted mid-block).
constexpr auto kCallerSpinBeforeYield = std::chrono::microseconds(200);

uint64_t generationOf(uint64_t claim) { return claim >> 32; }

ThreadPool::ThreadPool(int threads) {
  int total =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < total; ++i) {
    try {
      workers_.emplace_back([this] { workerLoop(); });
    } catch (const std::system_error& e) {
      // The system refused a thread (its limit on threads or memory): stop the ones started, so
      // the caller gets an error rather than a pool that never finishes shutting down.
      stopWorkers();
      throw Error(ErrorCode::kInvalidArgument,
                  "cannot start " + std::to_string(total) + " threads: the system refused thread " +
                      std::to_string(i + 1) + " (" + e.what() + "); ask for fewer threads");
    }
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard<std::mutex> lock(sleepMutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void ThreadPool::runBlocks(uint64_t generation) {
  for (;;) {
    uint64_t claim = claim_.load(std::memory_order_acquire);
    if (generationOf(claim) != generation) return;
    // Read the job before claiming: a successful claim proves these are still this job's fields.
    const auto* fn = job_.load(std::memory_order_relaxed);
    const int64_t n = jobSize_.load(std::memory_order_relaxed),
                  parts = blocks_.load(std::memory_order_relaxed);
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
    auto idleSince = std::chrono::steady_clock::now();
    uint64_t generation = generationOf(claim_.load(std::memory_order_acquire));
    for (int spins = 1; generation == done && !stopping_.load(std::memory_order_relaxed); ++spins) {
      cpuRelax();
      if ((spins & 63) == 0) {
        auto now = std::chrono::steady_clock::now();
        if (activeRuns_.load(std::memory_order_relaxed) > 0) {
          idleSince = now;  // a run is in progress: the next layer is coming, stay awake
        } else if (now - idleSince > kSpinBeforeSleep) {
          std::unique_lock<std::mutex> lock(sleepMutex_);
          // sleeping_ is raised before the predicate reads claim_ and activeRuns_ (all seq_cst),
          // and publishers raise those before reading sleeping_: one side always sees the other.
          sleeping_.fetch_add(1);
          wake_.wait(lock, [&] {
            return stopping_ || generationOf(claim_.load()) != done || activeRuns_.load() > 0;
          });
          sleeping_.fetch_sub(1);
          idleSince = std::chrono::steady_clock::now();
        }
      }
      generation = generationOf(claim_.load(std::memory_order_acquire));
    }
    if (stopping_) return;
    runBlocks(generation);
    done = generation;
  }
}

// A worker woken on the CPU its caller is running on shares it with the caller (each spinning
// for the other) until the kernel moves one of them, which on some machines takes milliseconds:
// schedulers that pack tasks onto few virtual CPUs so idle ones stay halted (this project's VMs:
// `sched_vcpu_pack`) wake a thread beside its waker even while another CPU idles, and the first
// inference after a pause ran several times slower (docs/performance.md). So the workers may use
// every CPU the caller may, except the one it is on: a wake-up then lands elsewhere. Only
// when the caller's CPU changes does this cost system calls (a few per worker), and only where
// the caller may use more CPUs than the pool has threads, so an oversubscribed pool is left alone.
void ThreadPool::keepWorkersOffCallerCpu() {
#if defined(__linux__)
  const int cpu = sched_getcpu();
  if (workers_.empty() || cpu < 0 || cpu == workersAvoidCpu_.load(std::memory_order_relaxed))
    return;
  std::unique_lock<std::mutex> lock(affinityMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another caller of the pool is setting it
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(cpu, &allowed) ||
      CPU_COUNT(&allowed) < size())
    return;
  CPU_CLR(cpu, &allowed);
  for (auto& worker : workers_)
    pthread_setaffinity_np(worker.native_handle(), sizeof allowed, &allowed);
  workersAvoidCpu_.store(cpu, std::memory_order_relaxed);
#endif
}

void ThreadPool::beginRun() {
  keepWorkersOffCallerCpu();
  activeRuns_.fetch_add(1);
  if (sleeping_.load() > 0) {
    {
      std::lock_guard<std::mutex> lock(sleepMutex_);
    }  // a worker past its predicate check is now waiting
    wake_.notify_all();
  }
}

void ThreadPool::endRun() { activeRuns_.fetch_sub(1); }

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                             int64_t maxParts) {
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
  keepWorkersOffCallerCpu();
  job_.store(&fn, std::memory_order_relaxed);
  jobSize_.store(n, std::memory_order_relaxed);
  blocks_.store(parts, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generationOf(claim_.load(std::memory_order_relaxed)) + 1;
  claim_.store(generation << 32);  // seq_cst: ordered before the read of sleeping_ (see workerLoop)
  if (sleeping_.load() > 0) {
    {
      std::lock_guard<std::mutex> lock(sleepMutex_);
    }  // a worker past its predicate check is now waiting
    wake_.notify_all();
  }
  runBlocks(generation);
  // The other blocks are running (claimed): spin for them, yielding only if they take long.
  auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  for (int spins = 1; finished_.load(std::memory_order_acquire) < parts; ++spins) {
    if (yielding) {
      std::this_thread::yield();
    } else {
      cpuRelax();
      if ((spins & 255) == 0)
        yielding = std::chrono::steady_clock::now() - start > kCallerSpinBeforeYield;
    }
  }
}

ThreadPool* currentThreadPool() { return tlsPool; }

ThreadPoolScope::ThreadPoolScope(ThreadPool* pool) : previous_(tlsPool) {
  tlsPool = pool;
  if (pool) pool->beginRun();
}

ThreadPoolScope::~ThreadPoolScope() {
  if (tlsPool) tlsPool->endRun();
  tlsPool = previous_;
}

int poolThreads() {
  const ThreadPool* pool = currentThreadPool();
  return pool ? pool->size() : 1;
}

void forEachThreadPart(int64_t items, int threads,
                       const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  ThreadPool* pool = currentThreadPool();
  const int64_t parts = std::min<int64_t>(threads, items);
  if (pool && parts > 1) {
    pool->parallelFor(parts, [&](int64_t p0, int64_t p1) {
      for (int64_t part = p0; part < p1; ++part)
        fn(part, part * items / parts, (part + 1) * items / parts);
    });
  } else {
    fn(0, 0, items);
  }
}

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (ThreadPool* pool = currentThreadPool()) {
    pool->parallelFor(n, fn);
  } else {
    fn(0, n);
  }
}

void parallelForAtLeast(int64_t n, int64_t minPerThread,
                        const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool* pool = currentThreadPool();
  const int64_t parts = minPerThread > 0 ? n / minPerThread : n;
  if (pool && parts >= 2) {
    pool->parallelFor(n, fn, parts);
  } else if (n > 0) {
    fn(0, n);
  }
}

}  // namespace kiln::cpu
