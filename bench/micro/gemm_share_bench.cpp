// SGEMM 1024^3 as a share of the FMA peak measured at the same moment on the same threads: each
// iteration times one GEMM and, right after it, the FMA chains of peak_fma.h on every thread of
// the pool for as many FLOPs. On a shared VM whose speed drifts by 10-20 % within minutes, the
// ratio of the pair is steadier than either time alone. Counters: share_median (of the pairs'
// ratios), share_best, and GFLOPS of the GEMM; peak_GFLOPS is the median of the peak runs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "peak_fma.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Args: threads. AVX-512 kernels (the FMA chains are 16 floats wide).
void BM_SgemmShareOfPeak(benchmark::State& state) {
  if (cpu::detectedCpuIsa() != cpu::CpuIsa::kAvx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  constexpr int64_t kN = 1024;
  const int threads = static_cast<int>(state.range(0));
  cpu::ThreadPool pool(threads);
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = kiln::testing::randomFloats(kN * kN, 1), B = kiln::testing::randomFloats(kN * kN, 2);
  std::vector<float> C(static_cast<size_t>(kN * kN));
  const double gemmFlops = 2.0 * double(kN) * double(kN) * double(kN);
  // Each thread runs its share of the GEMM's FLOPs as FMA chains.
  const int64_t chainSteps = static_cast<int64_t>(gemmFlops / threads / (kFmaChains * 16 * 2));
  std::vector<double> shares, gemmRates, peakRates;
  for (auto _ : state) {
    const Clock::time_point gemmStart = Clock::now();
    cpu::sgemm(false, false, kN, kN, kN, 1.0f, A.data(), kN, B.data(), kN, 0.0f, C.data(), kN);
    benchmark::ClobberMemory();
    const double gemmSeconds = secondsSince(gemmStart);
    const Clock::time_point peakStart = Clock::now();
    pool.parallelFor(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) benchmark::DoNotOptimize(fmaChainsAvx512(chainSteps));
    });
    const double peakSeconds = secondsSince(peakStart);
    shares.push_back(peakSeconds / gemmSeconds);
    gemmRates.push_back(gemmFlops / gemmSeconds * 1e-9);
    peakRates.push_back(double(chainSteps) * kFmaChains * 16 * 2 * threads / peakSeconds * 1e-9);
  }
  state.counters["share_median"] = median(shares);
  state.counters["share_best"] = *std::max_element(shares.begin(), shares.end());
  state.counters["GFLOPS"] = median(gemmRates);
  state.counters["peak_GFLOPS"] = median(peakRates);
}
BENCHMARK(BM_SgemmShareOfPeak)->ArgNames({"threads"})->Arg(1)->Arg(2)->Iterations(60)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
