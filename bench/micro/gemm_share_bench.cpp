// SGEMM 1024^3 as a share of the FMA peak measured at the same moment on the same threads: each
// iteration times one GEMM (or its micro-kernel calls alone) and, right after it, the FMA chains
// of peak_fma.h on every thread of the pool for as many FLOPs. On a shared VM whose speed drifts
// by 10-20 % within minutes, the ratio of the pair is steadier than either time alone. Counters:
// share_median (of the pairs' ratios), share_fastest (fastest peak run over fastest GEMM run: the
// share with the VM's interruptions left out), GFLOPS (median) and peak_GFLOPS (median).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/gemm/sgemm_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "peak_fma.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int64_t kN = 1024;

// A kN x kN operand held as kiln holds tensors (core/aligned_memory.h: 2 MiB aligned, huge pages
// advised), random (seed) or zero.
std::shared_ptr<float> matrix(uint32_t seed) {
  std::shared_ptr<float> m = allocateSharedFloats(kN * kN);
  if (seed != 0) {
    const std::vector<float> values = kiln::testing::randomFloats(kN * kN, seed);
    std::copy(values.begin(), values.end(), m.get());
  }
  return m;
}

// Times `gemm` (2 kN^3 FLOPs on the pool's threads) paired with the FMA peak, once per iteration
// (200), and sets the counters above.
void measureShareOfPeak(benchmark::State& state, cpu::ThreadPool& pool,
                        const std::function<void()>& gemm) {
  const int threads = pool.size();
  const double gemmFlops = 2.0 * double(kN) * double(kN) * double(kN);
  // Each thread runs its share of the GEMM's FLOPs as FMA chains.
  const int64_t chainSteps = static_cast<int64_t>(gemmFlops / threads / (kFmaChains * 16 * 2));
  std::vector<double> shares, gemmRates, peakRates;
  double fastestGemm = 1e30, fastestPeak = 1e30;
  for (auto _ : state) {
    const Clock::time_point gemmStart = Clock::now();
    gemm();
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
    fastestGemm = std::min(fastestGemm, gemmSeconds);
    fastestPeak = std::min(fastestPeak, peakSeconds);
  }
  state.counters["share_median"] = median(shares);
  state.counters["share_fastest"] = fastestPeak / fastestGemm;
  state.counters["GFLOPS"] = median(gemmRates);
  state.counters["peak_GFLOPS"] = median(peakRates);
}

bool hasAvx512(benchmark::State& state) {
  if (cpu::detectedCpuIsa() == cpu::CpuIsa::kAvx512) return true;
  state.SkipWithError("no AVX-512 on this CPU");
  return false;
}

// The whole SGEMM, packing included. Args: threads.
void BM_SgemmShareOfPeak(benchmark::State& state) {
  if (!hasAvx512(state)) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  cpu::ThreadPoolScope scope(&pool);
  const std::shared_ptr<float> A = matrix(1), B = matrix(2), C = matrix(0);
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(kN, kN, kN, cpu::poolThreads()));
  measureShareOfPeak(state, pool, [&] {
    cpu::sgemm(false, false, kN, kN, kN, 1.0f, A.get(), kN, B.get(), kN, 0.0f, C.get(), kN, ws);
  });
}
BENCHMARK(BM_SgemmShareOfPeak)
    ->ArgNames({"threads"})
    ->Arg(1)
    ->Arg(2)
    ->Iterations(200)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The micro-kernel alone on the 1024^3 product: A and B packed whole beforehand (packA / packB,
// the kernel's strip layout, kc blocks one after another), then the calls the blocked loop makes:
// per kc block, each 14-row A strip times every 32-column B strip, C accumulated over the blocks;
// on 2 threads each takes half of the A strips, as sgemm splits C by rows. A strip streams from
// memory here where sgemm's freshly packed block is in L2, so this is a lower bound on the
// kernel's share inside sgemm. Args: threads.
void BM_SgemmMicroKernelShareOfPeak(benchmark::State& state) {
  if (!hasAvx512(state)) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(0)));
  cpu::ThreadPoolScope scope(&pool);
  const cpu::SgemmKernelInfo& ki = cpu::sgemmKernelAvx512();
  const std::shared_ptr<float> A = matrix(1), B = matrix(2), C = matrix(0);
  const cpu::PackedMatrix packedA = cpu::packA(false, kN, kN, A.get(), kN);
  const cpu::PackedMatrix packedB = cpu::packB(false, kN, kN, B.get(), kN);
  const int64_t paddedM = (kN + ki.mr - 1) / ki.mr * ki.mr,
                paddedN = (kN + ki.nr - 1) / ki.nr * ki.nr;
  measureShareOfPeak(state, pool, [&] {
    pool.parallelFor(paddedM / ki.mr, [&](int64_t s0, int64_t s1) {
      for (int64_t k0 = 0; k0 < kN; k0 += ki.kc) {
        const int64_t kc = std::min(ki.kc, kN - k0);
        const float* aBlock = packedA.data() + k0 * paddedM;
        const float* bBlock = packedB.data() + k0 * paddedN;
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t i = s * ki.mr, rows = std::min(ki.mr, kN - i);
          for (int64_t j = 0; j < kN; j += ki.nr) {
            ki.kernel(kc, aBlock + i * kc, bBlock + j * kc, C.get() + i * kN + j, kN, rows,
                      std::min(ki.nr, kN - j), k0 > 0);
          }
        }
      }
    });
  });
}
BENCHMARK(BM_SgemmMicroKernelShareOfPeak)
    ->ArgNames({"threads"})
    ->Arg(1)
    ->Arg(2)
    ->Iterations(200)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
