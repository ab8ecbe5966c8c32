// The intra-op thread pool, and SGEMM split across it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "guarded_workspace.h"
#include "kiln/error.h"

namespace kiln::cpu {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n = " << n;
    }
  }
}

TEST(ThreadPool, ConcurrentCallersBothFinish) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int r = 0; r < 200; ++r)
      pool.parallelFor(64, [&](int64_t b, int64_t e) { total += e - b; });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(total.load(), 2 * 200 * 64);
}

TEST(ThreadPool, ParallelForAtLeastKeepsSmallLoopsOnTheCaller) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> blocks{0};
  std::atomic<bool> offCaller{false};
  parallelForAtLeast(1000, 600, [&](int64_t b, int64_t e) {  // fewer than 2 x 600 items: one block
    ++blocks;
    if (std::this_thread::get_id() != caller) offCaller = true;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
  });
  EXPECT_EQ(blocks.load(), 1);
  EXPECT_FALSE(offCaller.load());
  std::vector<std::atomic<int>> hits(5000);
  parallelForAtLeast(5000, 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, NestedParallelForRunsInlineWithoutDeadlock) {
  ThreadPool pool(2);
  ThreadPoolScope scope(&pool);
  std::vector<std::atomic<int>> hits(64 * 64);
  parallelFor(64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallelFor(64, [&](int64_t b2, int64_t e2) {  // inner loop, from the caller or a worker
        for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * 64 + j)]++;
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

// Polls `condition` for up to two seconds (a loaded machine can be slow to schedule a worker).
template <typename F>
bool eventually(F condition) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

TEST(ThreadPool, IdleWorkersSleepAndARunWakesThemAndKeepsThemAwake) {
  ThreadPool pool(3);
  pool.parallelFor(8, [](int64_t, int64_t) {});
  // Idle outside a run: both workers go to sleep after their short spin, not burn a core forever.
  ASSERT_TRUE(eventually([&] { return pool.sleepingWorkers() == 2; }));
  {
    ThreadPoolScope run(&pool);  // an inference starts: the workers are woken before the first job
    ASSERT_TRUE(eventually([&] { return pool.sleepingWorkers() == 0; }));
    // During the run they stay awake across gaps between jobs much longer than the idle spin.
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(pool.sleepingWorkers(), 0);
      std::vector<std::atomic<int>> hits(100);
      parallelFor(100, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) hits[static_cast<size_t>(j)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
  // The run is over: they fall asleep again.
  EXPECT_TRUE(eventually([&] { return pool.sleepingWorkers() == 2; }));
}

TEST(ThreadPool, JobsPublishedWhileWorkersFallAsleepAreNeverLost) {
  // Gaps around the workers' spin time, so that jobs arrive while they are going to sleep; a lost
  // wake-up would still finish (the caller claims every block) but is caught by the worker count.
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::atomic<int> onWorker{0};
  const auto caller = std::this_thread::get_id();
  for (int r = 0; r < 60; ++r) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (r % 10)));
    pool.parallelFor(2, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != caller) onWorker++;
      std::this_thread::sleep_for(
          std::chrono::milliseconds(2));  // long enough for a woken worker to claim
      total += e - b;
    });
  }
  EXPECT_EQ(total.load(), 2 * 60);
  EXPECT_GT(onWorker.load(), 20);  // most jobs had their second block run by the worker
}

TEST(ThreadPool, NestedScopesKeepThePoolAwakeUntilTheOuterEnds) {
  ThreadPool pool(2);
  ThreadPool* outer = nullptr;
  {
    ThreadPoolScope a(&pool);
    {
      ThreadPoolScope b(&pool);
      ThreadPoolScope none(nullptr);
      EXPECT_EQ(currentThreadPool(), nullptr);
    }
    outer = currentThreadPool();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(pool.sleepingWorkers(), 0);
  }
  EXPECT_EQ(outer, &pool);
  EXPECT_EQ(currentThreadPool(), nullptr);
  EXPECT_TRUE(eventually([&] { return pool.sleepingWorkers() == 1; }));
}

TEST(ThreadPool, SgemmSplitAcrossThreadsMatchesOneThread) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto [M, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{70, 300, 90}, {300, 40, 90}, {97, 101, 513}}) {
    std::vector<float> A(M * K), B(K * N), serial(M * N), parallel(M * N);
    for (float& v : A) v = dist(rng);
    for (float& v : B) v = dist(rng);
    const kiln::testing::GuardedWorkspace one(sgemmWorkspaceBytes(M, N, K, 1));
    sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, serial.data(), N,
          one.data());
    ThreadPool pool(3);
    ThreadPoolScope scope(&pool);
    // Each thread packs into its own slot of a workspace sized for three.
    const kiln::testing::GuardedWorkspace three(sgemmWorkspaceBytes(M, N, K, 3));
    EXPECT_GT(sgemmWorkspaceBytes(M, N, K, 3), sgemmWorkspaceBytes(M, N, K, 1));
    sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, parallel.data(), N,
          three.data());
    EXPECT_TRUE(one.intact() && three.intact()) << M << "x" << N << "x" << K;
    EXPECT_EQ(serial, parallel) << M << "x" << N << "x" << K;
  }
}

// Issue 22: a pool the system cannot start (here: too little address space for 1024 thread
// stacks) must fail with a clear error, not hang while shutting down the threads it did start.
// Runs in a child process, since it lowers the process's address-space limit.
// Restricts the test's thread to two of the CPUs it may use, for the object's lifetime; empty()
// when it has fewer than two.
class TwoCpus {
 public:
  TwoCpus() {
    sched_getaffinity(0, sizeof original_, &original_);
    CPU_ZERO(&cpus_);
    for (int cpu = 0; cpu < CPU_SETSIZE && CPU_COUNT(&cpus_) < 2; ++cpu)
      if (CPU_ISSET(cpu, &original_)) CPU_SET(cpu, &cpus_);
    if (!empty()) sched_setaffinity(0, sizeof cpus_, &cpus_);
  }
  ~TwoCpus() { sched_setaffinity(0, sizeof original_, &original_); }
  bool empty() const { return CPU_COUNT(&cpus_) < 2; }
  const cpu_set_t& cpus() const { return cpus_; }

 private:
  cpu_set_t original_, cpus_;
};

// What a worker sees of itself while it runs a block of `parts` blocks that wait for each
// other, so that every pool thread runs one: the view of the first block a worker ran.
struct WorkerView {
  cpu_set_t affinity;
  int cpu = -1;
};
WorkerView runOnEveryThread(ThreadPool& pool, int parts) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> started{0};
  std::vector<WorkerView> views(static_cast<size_t>(parts));  // one per block: no shared writes
  pool.parallelFor(parts, [&](int64_t b0, int64_t) {
    ++started;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (started.load() < parts && std::chrono::steady_clock::now() < deadline) {
    }
    if (std::this_thread::get_id() != caller) {
      WorkerView& view = views[static_cast<size_t>(b0)];
      sched_getaffinity(0, sizeof view.affinity, &view.affinity);
      view.cpu = sched_getcpu();
    }
  });
  for (const WorkerView& view : views)
    if (view.cpu >= 0) return view;
  return WorkerView{};
}

TEST(ThreadPool, WorkersRunOffTheCallersCpu) {
  // A worker woken beside its caller shares the caller's CPU until the kernel moves one of them;
  // the pool keeps the workers off the CPU the caller is on (thread_pool.cpp).
  TwoCpus two;
  if (two.empty()) GTEST_SKIP() << "needs two CPUs";
  ThreadPool pool(2);
  int consistent = 0, avoided = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int before = sched_getcpu();
    const WorkerView worker = runOnEveryThread(pool, 2);
    if (sched_getcpu() != before || worker.cpu < 0) continue;  // the caller moved meanwhile
    ++consistent;
    cpu_set_t expected = two.cpus();
    CPU_CLR(before, &expected);
    if (CPU_EQUAL(&worker.affinity, &expected) && worker.cpu != before) ++avoided;
  }
  ASSERT_GT(consistent, 0);
  EXPECT_GT(avoided, 0) << "in " << consistent << " tries the worker could run on the caller's CPU";
}

TEST(ThreadPool, AnOversubscribedPoolKeepsEveryCpu) {
  TwoCpus two;
  if (two.empty()) GTEST_SKIP() << "needs two CPUs";
  ThreadPool pool(3);  // more threads than the caller's CPUs: confining the workers would slow it
  const WorkerView worker = runOnEveryThread(pool, 3);
  ASSERT_GE(worker.cpu, 0);
  EXPECT_TRUE(CPU_EQUAL(&worker.affinity, &two.cpus()));
}

TEST(ThreadPoolDeathTest, RefusedThreadsGiveAnErrorInsteadOfAHang) {
  EXPECT_EXIT(
      {
        rlimit limit{};
        getrlimit(RLIMIT_AS, &limit);
        std::ifstream statm("/proc/self/statm");
        uint64_t pages = 0;
        statm >> pages;
        // What the process uses now plus 256 MiB: room for ~30 thread stacks of 8 MiB, not 1023.
        limit.rlim_cur =
            pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + (uint64_t{256} << 20);
        setrlimit(RLIMIT_AS, &limit);
        try {
          ThreadPool pool(1024);
        } catch (const Error& e) {
          const std::string message = e.what();
          std::exit(message.find("cannot start 1024 threads: the system refused thread") == 0 ? 0
                                                                                              : 2);
        }
        std::exit(3);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kiln::cpu
