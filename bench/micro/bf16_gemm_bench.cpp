// The BF16 GEMM (gemm/bf16_gemm.h) beside SGEMM on BERT's linear layers and a memory-bound
// few-row product, B packed once (weights), 1 and 2 threads; and the peak rate of vdpbf16ps
// chains beside FMA chains (BM_PeakFma), which bounds what BF16 can gain on a CPU.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/bf16_gemm.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "peak_fma.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

constexpr int64_t kIterations = 1 << 20;

// Args: M, N, K, threads, bf16 (1) or FP32 (0).
void BM_GemmPackedBByPrecision(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool bf16 = state.range(4) != 0;
  if (bf16 && !cpu::bf16GemmSupported()) {
    state.SkipWithError("no AVX512_BF16 on this CPU");
    return;
  }
  cpu::ThreadPool pool(static_cast<int>(state.range(3)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = kiln::testing::randomFloats(M * K, 1),
                           B = kiln::testing::randomFloats(K * N, 2);
  std::vector<float> C(static_cast<size_t>(M * N));
  const cpu::PackedMatrix f32 = bf16 ? cpu::PackedMatrix{} : cpu::packB(false, K, N, B.data(), N);
  const cpu::PackedBf16Matrix b16 =
      bf16 ? cpu::packBf16B(false, K, N, B.data(), N) : cpu::PackedBf16Matrix{};
  ScratchFloats scratch;
  void* ws = scratch.getBytes(bf16 ? cpu::bf16GemmWorkspaceBytes(b16, M)
                                   : cpu::sgemmWorkspaceBytes(f32, M, cpu::poolThreads()));
  for (auto _ : state) {
    if (bf16) {
      cpu::bf16GemmPacked(false, M, A.data(), K, b16, 0.0f, C.data(), N, ws);
    } else {
      cpu::sgemmPacked(false, M, 1.0f, A.data(), K, f32, 0.0f, C.data(), N, ws);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "bf16"});
  const int64_t list[][3] = {{128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}, {8, 4096, 4096}};
  for (const auto& s : list)
    for (int threads : {1, 2})
      for (int bf16 : {0, 1}) b->Args({s[0], s[1], s[2], threads, bf16});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void BM_PeakDpbf16(benchmark::State& state) {
  if (!cpu::cpuSupports(cpu::CpuIsa::kAvx512Bf16)) {
    state.SkipWithError("no AVX512_BF16 on this CPU");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(dpbf16ChainsAvx512(kIterations));
  state.counters["GFLOPS"] = benchmark::Counter(double(kIterations) * kFmaChains * 32 * 2 * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_GemmPackedBByPrecision)->Apply(shapes);
BENCHMARK(BM_PeakDpbf16)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
