// The vectorised activations built on kiln's float exp (backends/cpu/activation_simd.h,
// kernels/softmax_exp.h): SiLU, Sigmoid and GELU through applyActivation (x -> y), SiLU in place
// through applyEpilogue (as the NchwcConv kernels run it over a stored band), and the row softmax,
// on the AVX-512 and the AVX2 code. "per16" is the time per 16 floats. 64K floats stay in L2;
// 1M floats (4 MiB in, 4 MiB out) stream from memory. Inputs are uniform in [-8, 8] as conv
// outputs roughly are. Filter e.g. --benchmark_filter='BM_SiLU/.*isa:1'.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/activation_row.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/softmax_exp.h"

namespace kiln::bench {
namespace {

using cpu::ActivationKind;
using cpu::CpuIsa;

std::vector<float> uniformFloats(int64_t n, float lo, float hi) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// The ISA of the benchmark's last argument (0 = AVX2, 1 = AVX-512); false (and the run skipped)
// when this CPU lacks it.
bool useIsa(benchmark::State& state, int64_t arg) {
  const CpuIsa isa = arg ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  if (isa > cpu::detectedCpuIsa()) {
    state.SkipWithError("CPU lacks this ISA");
    return false;
  }
  cpu::setCpuIsaLimit(isa);
  state.SetLabel(cpu::cpuIsaName(isa));
  return true;
}

void perSixteenFloats(benchmark::State& state, int64_t n) {
  state.counters["per16"] = benchmark::Counter(
      static_cast<double>(n) / 16.0,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Args: floats, isa.
void runActivation(benchmark::State& state, ActivationKind kind) {
  const cpu::Activation act{kind, 0, 0};
  const int64_t n = state.range(0);
  if (!useIsa(state, state.range(1))) return;
  const std::vector<float> x = uniformFloats(n, -8.0f, 8.0f);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    cpu::applyActivation(act, x.data(), y.data(), n);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  perSixteenFloats(state, n);
}
void BM_SiLU(benchmark::State& state) { runActivation(state, ActivationKind::kSiLU); }
void BM_Sigmoid(benchmark::State& state) { runActivation(state, ActivationKind::kSigmoid); }
void BM_Gelu(benchmark::State& state) { runActivation(state, ActivationKind::kGelu); }

// SiLU in place on a band of 60 KiB (stays in L2), as the NchwcConv epilogue runs it. The band is
// rewritten from a saved copy every 64 passes, untimed, so that repeated SiLU (which halves
// negative values near 0) never reaches subnormals.
void BM_SiluEpilogue(benchmark::State& state) {
  const int64_t n = state.range(0);
  if (!useIsa(state, state.range(1))) return;
  const std::vector<float> x = uniformFloats(n, -8.0f, 8.0f);
  std::vector<float> y = x;
  int pass = 0;
  for (auto _ : state) {
    if (++pass % 64 == 0) {
      state.PauseTiming();
      y = x;
      state.ResumeTiming();
    }
    cpu::applyEpilogue(cpu::Activation{ActivationKind::kSiLU, 0, 0}, y.data(), n, 0.0f, nullptr);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  perSixteenFloats(state, n);
}

// Args: rows of 512 floats (attention-like), isa. Reset each pass from a copy (softmax is in
// place).
void BM_SoftmaxRows(benchmark::State& state) {
  constexpr int64_t kRow = 512;
  const int64_t rows = state.range(0), n = rows * kRow;
  if (!useIsa(state, state.range(1))) return;
  const std::vector<float> x = uniformFloats(n, -10.0f, 10.0f);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    std::copy(x.begin(), x.end(), y.begin());
    cpu::softmaxRows(y.data(), kRow, nullptr, 0, rows, kRow);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  perSixteenFloats(state, n);
}

void activationArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "isa"});
  for (int64_t n : {int64_t{1} << 16, int64_t{1} << 20}) {
    for (int64_t isa : {1, 0}) b->Args({n, isa});
  }
  b->Unit(benchmark::kMicrosecond)->MinTime(0.2);
}

BENCHMARK(BM_SiLU)->Apply(activationArgs);
BENCHMARK(BM_Sigmoid)->Apply(activationArgs);
BENCHMARK(BM_Gelu)->Apply(activationArgs);
BENCHMARK(BM_SiluEpilogue)
    ->ArgNames({"n", "isa"})
    ->Args({15360, 1})
    ->Args({15360, 0})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);
BENCHMARK(BM_SoftmaxRows)
    ->ArgNames({"rows", "isa"})
    ->Args({64, 1})
    ->Args({64, 0})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace kiln::bench
