// qlinearBinaryRun (kiln::QLinearAdd, the residual add of a QDQ ResNet) on uint8 operands of the
// same shape, on the AVX-512 and the AVX2 code: 64K elements (stays in L2) and 802816 (a
// 256x56x56 activation, as ResNet-50's first stage adds). "per64" is the time per 64 elements.
// Filter e.g. --benchmark_filter='BM_QLinearAdd/.*'.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/qlinear_binary_run.h"

namespace kiln::bench {
namespace {

using cpu::CpuIsa;

// Args: elements, isa (0 = AVX2, 1 = AVX-512).
void BM_QLinearAdd(benchmark::State& state) {
  const int64_t n = state.range(0);
  const CpuIsa isa = state.range(1) ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  if (isa > cpu::detectedCpuIsa()) {
    state.SkipWithError("CPU lacks this ISA");
    return;
  }
  cpu::setCpuIsaLimit(isa);
  state.SetLabel(cpu::cpuIsaName(isa));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> dist(0, 255);
  std::vector<uint8_t> a(static_cast<size_t>(n)), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(dist(rng));
    b[i] = static_cast<uint8_t>(dist(rng));
  }
  const cpu::FloatQuantization qa{0.031f, 131.0f}, qb{0.047f, 120.0f}, qc{0.043f, 125.0f};
  for (auto _ : state) {
    cpu::qlinearBinaryRun(cpu::QLinearBinaryOp::kAdd, a.data(), 1, qa, b.data(), 1, qb, c.data(), n,
                          qc);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  state.counters["per64"] = benchmark::Counter(
      static_cast<double>(n) / 64.0,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_QLinearAdd)->ArgsProduct({{65536, 802816}, {0, 1}});

}  // namespace
}  // namespace kiln::bench
