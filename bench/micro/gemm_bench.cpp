// SGEMM at 1024^3 and at the shapes of BERT's linear layers and ResNet's convolutions, on 1 and
// 2 threads, on each ISA path, with and without a pre-packed B, and ResNet's 1x1 convolutions
// with pre-packed weights as A; GFLOPS is the counter to read. Matrix-vector products with a
// pre-packed B (M = 1: a classifier on one image, an LSTM step), where GBps (the weights read
// per second) is.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using kiln::testing::randomFloats;

// The ISA limit for range(4) (0 = AVX2, 1 = AVX-512); false (and the benchmark skipped) if absent.
bool selectIsa(benchmark::State& state, int64_t code) {
  if (code == 1 && cpu::detectedCpuIsa() != cpu::CpuIsa::kAvx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return false;
  }
  cpu::setCpuIsaLimit(code == 1 ? cpu::CpuIsa::kAvx512 : cpu::CpuIsa::kAvx2);
  return true;
}

void setFlops(benchmark::State& state, int64_t M, int64_t N, int64_t K) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(M) * double(N) * double(K) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Args: M, N, K, threads, isa.
void BM_Sgemm(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  if (!selectIsa(state, state.range(4))) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(3)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = randomFloats(M * K, 1), B = randomFloats(K * N, 2);
  std::vector<float> C(static_cast<size_t>(M * N));
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(M, N, K, cpu::poolThreads()));
  for (auto _ : state) {
    cpu::sgemm(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N, ws);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  setFlops(state, M, N, K);
}

// B packed once outside the loop (constant weights), with a bias + Relu epilogue.
void BM_SgemmPackedB(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  if (!selectIsa(state, state.range(4))) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(3)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = randomFloats(M * K, 1), B = randomFloats(K * N, 2),
                           bias = randomFloats(N, 3);
  std::vector<float> C(static_cast<size_t>(M * N));
  const cpu::PackedMatrix packed = cpu::packB(false, K, N, B.data(), N);
  cpu::GemmEpilogue ep;
  ep.bias = bias.data();
  ep.activation.kind = cpu::ActivationKind::kRelu;
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(packed, M, cpu::poolThreads()));
  for (auto _ : state) {
    cpu::sgemmPacked(false, M, 1.0f, A.data(), K, packed, 0.0f, C.data(), N, ws, ep);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  setFlops(state, M, N, K);
}

// A (weights) packed once outside the loop, with a per-row bias + Relu epilogue: a 1x1
// convolution as W[M = out channels x K = in channels] x X[K x N = pixels].
void BM_SgemmPackedA(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  if (!selectIsa(state, state.range(4))) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(3)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = randomFloats(M * K, 1), B = randomFloats(K * N, 2),
                           bias = randomFloats(M, 3);
  std::vector<float> C(static_cast<size_t>(M * N));
  const cpu::PackedMatrix packed = cpu::packA(false, M, K, A.data(), K);
  cpu::GemmEpilogue ep;
  ep.bias = bias.data();
  ep.biasPerRow = true;
  ep.activation.kind = cpu::ActivationKind::kRelu;
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(packed, N, cpu::poolThreads()));
  for (auto _ : state) {
    cpu::sgemmPacked(packed, N, 1.0f, false, B.data(), N, 0.0f, C.data(), N, ws, ep);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  setFlops(state, M, N, K);
}

// M = 1 on a B packed once: each weight is read once, so the rate is the weights' bytes.
void BM_SgemvPackedB(benchmark::State& state) {
  const int64_t N = state.range(0), K = state.range(1);
  if (!selectIsa(state, state.range(3))) return;
  cpu::ThreadPool pool(static_cast<int>(state.range(2)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> A = randomFloats(K, 1), B = randomFloats(K * N, 2);
  std::vector<float> C(static_cast<size_t>(N));
  const cpu::PackedMatrix packed = cpu::packB(false, K, N, B.data(), N);
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(packed, 1, cpu::poolThreads()));
  for (auto _ : state) {
    cpu::sgemmPacked(false, 1, 1.0f, A.data(), K, packed, 0.0f, C.data(), N, ws);
    benchmark::ClobberMemory();
  }
  cpu::clearCpuIsaLimit();
  state.counters["GBps"] = benchmark::Counter(double(N) * double(K) * sizeof(float) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void gemmShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "avx512"});
  const int64_t shapes[][3] = {
      {1024, 1024, 1024},  // the target
      {128, 768, 768},     // BERT attention projections (seq 128, hidden 768)
      {128, 2304, 768},    // BERT fused Q/K/V projection
      {128, 3072, 768},    // BERT FFN up
      {128, 768, 3072},    // BERT FFN down
      {64, 3136, 576},     // ResNet-50 conv2 3x3 (64 ch, 56x56) as W[64 x 576] x im2col[576 x 3136]
      {3136, 64, 576},     // the same product transposed (NHWC-style)
      {128, 784, 1152},    // ResNet-50 conv3 3x3 (128 ch, 28x28) as W x columns
  };
  for (int isa = 1; isa >= 0; --isa) {
    for (const auto& s : shapes) {
      for (int threads : {1, 2}) b->Args({s[0], s[1], s[2], threads, isa});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
// ResNet-50's 1x1 convolutions (batch 1): M = out channels, N = pixels, K = in channels.
void conv1x1Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "threads", "avx512"});
  const int64_t shapes[][3] = {
      {64, 3136, 64},  {256, 3136, 64},  {64, 3136, 256},
      {512, 784, 128}, {1024, 196, 256}, {2048, 49, 512},
  };
  for (int isa = 1; isa >= 0; --isa) {
    for (const auto& s : shapes) {
      for (int threads : {1, 2}) b->Args({s[0], s[1], s[2], threads, isa});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

// Matrix-vector products: N outputs, depth K.
void gemvShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "K", "threads", "avx512"});
  const int64_t shapes[][2] = {
      {2048, 512},   // an LSTM step of hidden 512 (4 gates): 4 MiB, in L3
      {1000, 2048},  // ResNet-50's classifier: 8 MiB
      {4096, 4096},  // 64 MiB, past L3: memory bandwidth
  };
  for (int isa = 1; isa >= 0; --isa) {
    for (const auto& s : shapes) {
      for (int threads : {1, 2}) b->Args({s[0], s[1], threads, isa});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Sgemm)->Apply(gemmShapes);
BENCHMARK(BM_SgemvPackedB)->Apply(gemvShapes);
BENCHMARK(BM_SgemmPackedB)->Apply(gemmShapes);
BENCHMARK(BM_SgemmPackedA)->Apply(conv1x1Shapes);

}  // namespace
}  // namespace kiln::bench
