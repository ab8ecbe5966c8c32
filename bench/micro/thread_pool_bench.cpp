// The intra-op thread pool's dispatch cost: a parallelFor whose blocks do almost nothing, back to
// back (as kernels run), so the time per iteration is the wake-up, claim and join overhead that
// the kernels' "worth a dispatch" thresholds (kMinElementsPerThread) are sized against.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "backends/cpu/thread_pool.h"

namespace kiln::bench {
namespace {

// Args: threads.
void BM_ParallelForOverhead(benchmark::State& state) {
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallelFor(pool.size(), [&](int64_t begin, int64_t end) {
      sink.fetch_add(end - begin, std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelForOverhead)->Arg(1)->Arg(2)->UseRealTime();

// The same dispatch with sleeping workers: a pause longer than the workers' spin before each
// call, timed by hand around the call alone (PauseTiming would add its own overhead).
void BM_ParallelForAfterIdle(benchmark::State& state) {
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto start = std::chrono::steady_clock::now();
    pool.parallelFor(pool.size(), [&](int64_t begin, int64_t end) {
      sink.fetch_add(end - begin, std::memory_order_relaxed);
    });
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelForAfterIdle)->Arg(1)->Arg(2)->UseManualTime()->Iterations(200);

}  // namespace
}  // namespace kiln::bench
