// The 8-bit GEMM (backends/cpu/qgemm) at the shapes of BERT's linear layers (weights on the right,
// C = A x B) and ResNet-50's convolutions (weights on the left, C = W x columns), on 1 and 2
// threads, on each ISA path (0 = AVX2, 1 = AVX-VNNI, 2 = AVX512-VNNI), requantized to u8; GOPS
// (2 per multiply-accumulate) is the counter to read, beside BM_PeakVnni (the vpdpbusd peak)
// and gemm_bench.cpp's SGEMM GFLOPS at the same shapes.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/qgemm/qconv_nhwc.h"
#include "backends/cpu/qgemm/qgemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "peak_vnni.h"

namespace kiln::bench {
namespace {

std::vector<uint8_t> randomBytes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<uint8_t>(dist(rng));
  return v;
}

// range(5): 0 = AVX2, 1 = AVX-VNNI, 2 = AVX512-VNNI; false (and skipped) when the CPU lacks it.
bool isaOf(benchmark::State& state, cpu::CpuIsa& isa) {
  const cpu::CpuIsa isas[] = {cpu::CpuIsa::kAvx2, cpu::CpuIsa::kAvxVnni, cpu::CpuIsa::kAvx512Vnni};
  isa = isas[state.range(5)];
  if (!cpu::cpuHas(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return false;
  }
  return true;
}

// Args: M, N, K, threads, weights on the left (1) or right (0), isa.
void BM_QGemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const cpu::QSide side = state.range(4) ? cpu::QSide::kLeft : cpu::QSide::kRight;
  cpu::CpuIsa isa;
  if (!isaOf(state, isa)) return;
  const int64_t wOuter = side == cpu::QSide::kLeft ? M : N;
  const std::vector<uint8_t> w = randomBytes(wOuter * K, 1), a = randomBytes(M * K, 2);
  const cpu::PackedQMatrix packed = cpu::packQWeights(side, isa, wOuter, K, {w.data(), K, 1, true});
  cpu::ThreadPool pool(threads);
  cpu::ThreadPoolScope scope(&pool);
  std::vector<uint8_t> c(static_cast<size_t>(M * N));
  const float scale = 0.001f;
  const int32_t zeroAct = 128;
  cpu::QGemmProblem p;
  p.M = M, p.N = N, p.K = K;
  p.weights = &packed;
  p.activations = side == cpu::QSide::kLeft ? cpu::QMatrixView{a.data(), 1, N, false}
                                            : cpu::QMatrixView{a.data(), K, 1, false};
  (side == cpu::QSide::kLeft ? p.zeroRight : p.zeroLeft) = &zeroAct;
  p.output.dtype = DataType::kUint8;
  p.output.scale = &scale;
  p.output.zeroPoint = 128;
  p.C = c.data();
  p.ldc = N;
  const uint64_t bytes = cpu::qgemmWorkspaceBytes(side, isa, M, N, K, threads);
  std::unique_ptr<void, void (*)(void*)> ws(allocateAligned(bytes), std::free);
  for (auto _ : state) {
    cpu::qgemm(p, ws.get());
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void qgemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "wleft", "isa"});
  const int64_t shapes[][4] = {
      {1024, 1024, 1024, 0},  // the SGEMM benchmark's square
      {128, 768, 768, 0},     // BERT attention projections
      {128, 3072, 768, 0},    // BERT FFN up
      {128, 768, 3072, 0},    // BERT FFN down
      {64, 3136, 576, 1},     // ResNet-50 conv2 3x3 as W[64 x 576] x columns[576 x 3136]
      {128, 784, 1152, 1},    // ResNet-50 conv3 3x3
      {256, 3136, 64, 1},     // ResNet-50 1x1 expansion
      {2048, 49, 512, 1},     // ResNet-50 last 1x1
  };
  for (int isa = 2; isa >= 0; --isa) {
    for (const auto& s : shapes) {
      for (int threads : {1, 2}) b->Args({s[0], s[1], s[2], threads, s[3], isa});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_QGemm)->Apply(qgemmShapes);

// The direct NHWC convolution (backends/cpu/qgemm/qconv_nhwc.h) at ResNet-50's shapes, u8 out.
// Args: output size (square), input channels, output channels, kernel (square), stride, threads.
void BM_QConvNhwc(benchmark::State& state) {
  const int64_t out = state.range(0), C = state.range(1), Cout = state.range(2), k = state.range(3),
                stride = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  if (!cpu::qconvNhwcAvailable()) {
    state.SkipWithError("no AVX512-VNNI on this CPU");
    return;
  }
  const int64_t pad = k / 2, in = (out - 1) * stride + k - 2 * pad, depth = k * k * C;
  const std::vector<uint8_t> w = randomBytes(Cout * depth, 1), x = randomBytes(in * in * C, 2);
  const cpu::PackedQMatrix packed = cpu::packQWeights(cpu::QSide::kRight, cpu::CpuIsa::kAvx512Vnni,
                                                      Cout, depth, {w.data(), depth, 1, true});
  cpu::ThreadPool pool(threads);
  cpu::ThreadPoolScope scope(&pool);
  std::vector<uint8_t> y(static_cast<size_t>(out * out * Cout));
  std::vector<int32_t> add(static_cast<size_t>(Cout), 0);
  const float scale = 0.001f;
  cpu::QConvNhwcProblem p;
  p.x = x.data();
  p.ih = p.iw = in, p.channels = C, p.oh = p.ow = out, p.kh = p.kw = k, p.sh = p.sw = stride;
  p.padTop = p.padLeft = pad, p.xZero = 128;
  p.weights = &packed;
  p.channelAdd = add.data();
  p.output.dtype = DataType::kUint8;
  p.output.scale = &scale;
  p.output.zeroPoint = 128;
  p.y = y.data();
  const uint64_t bytes = cpu::qconvNhwcWorkspaceBytes(k * k, C, threads);
  std::unique_ptr<void, void (*)(void*)> ws(allocateAligned(bytes), std::free);
  for (auto _ : state) {
    cpu::qconvNhwc(p, ws.get());
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] =
      benchmark::Counter(2.0 * double(out * out) * double(Cout) * double(depth) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QConvNhwc)
    ->ArgNames({"out", "C", "Cout", "k", "stride", "threads"})
    ->Args({56, 64, 64, 3, 1, 1})
    ->Args({28, 128, 128, 3, 1, 1})
    ->Args({14, 256, 256, 3, 1, 1})
    ->Args({7, 512, 512, 3, 1, 1})
    ->Args({56, 64, 256, 1, 1, 1})
    ->Args({56, 256, 64, 1, 1, 1})
    ->Args({7, 512, 2048, 1, 1, 1})
    ->Args({7, 1024, 2048, 1, 2, 1})
    ->Args({14, 256, 256, 3, 1, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

constexpr int64_t kIterations = 1 << 20;

// The vpdpbusd peak on 1 and 2 threads (GOPS: 64 multiply-accumulates per instruction).
void BM_PeakVnni(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  if (!cpu::cpuHas(cpu::CpuIsa::kAvx512Vnni)) {
    state.SkipWithError("no AVX512-VNNI on this CPU");
    return;
  }
  cpu::ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallelFor(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) benchmark::DoNotOptimize(vnniChainsAvx512(kIterations));
    });
  }
  const double ops = double(kIterations) * kVnniChains * 64 * 2 * threads;
  state.counters["GOPS"] =
      benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakVnni)
    ->ArgNames({"threads"})
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
