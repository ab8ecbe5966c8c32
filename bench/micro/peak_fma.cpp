// Peak FP32 FMA throughput per core (1 thread) and of two cores (2 threads on the intra-op
// pool): the denominator of every "share of peak" figure.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/thread_pool.h"
#include "peak_fma.h"

namespace kiln::bench {

float fmaChainsAvx2(int64_t iterations) {
  __m256 acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < kFmaChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kFmaChains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return lanes[0] + lanes[7];
}

namespace {

constexpr int64_t kIterations = 1 << 20;

// range(0): vector width in floats (8 = AVX2, 16 = AVX-512); range(1): threads.
void BM_PeakFma(benchmark::State& state) {
  const int width = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  if (width == 16 && cpu::detectedCpuIsa() != cpu::CpuIsa::kAvx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  cpu::ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallelFor(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        benchmark::DoNotOptimize(width == 16 ? fmaChainsAvx512(kIterations)
                                             : fmaChainsAvx2(kIterations));
      }
    });
  }
  const double flops = double(kIterations) * kFmaChains * width * 2 * threads;
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakFma)
    ->ArgNames({"width", "threads"})
    ->Args({8, 1})
    ->Args({16, 1})
    ->Args({8, 2})
    ->Args({16, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
