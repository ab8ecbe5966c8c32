// ResNet-50's 3x3 stride-1 convolutions (batch 1, padding 1) two ways, to choose between them per
// shape: Winograd F(2x2, 3x3) with pre-packed filters, and im2col + GEMM with pre-packed weights.
// GFLOPS counts the direct convolution's 2 * OC * IC * 9 * H * W, so the two are comparable.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using kiln::testing::randomFloats;

ir::ConvGeometry same3x3(int64_t h, int64_t w) {
  ir::ConvGeometry g;
  g.kernel = {3, 3};
  g.strides = {1, 1};
  g.dilations = {1, 1};
  g.padsBegin = {1, 1};
  g.padsEnd = {1, 1};
  g.outputPadding = {0, 0};
  g.output = {h, w};
  return g;
}

void setConvFlops(benchmark::State& state, int64_t c, int64_t oc, int64_t h, int64_t w) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * double(oc) * double(c) * 9.0 * double(h) * double(w) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

// Args: channels (in = out), height = width, threads.
void BM_Conv3x3Winograd(benchmark::State& state) {
  const int64_t c = state.range(0), hw = state.range(1);
  cpu::ThreadPool pool(static_cast<int>(state.range(2)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> x = randomFloats(c * hw * hw, 1), w = randomFloats(c * c * 9, 2);
  std::vector<float> y(static_cast<size_t>(c * hw * hw));
  const cpu::WinogradWeights filters = cpu::packWinogradFilters(w.data(), c, c);
  const ir::ConvGeometry g = same3x3(hw, hw);
  ScratchFloats scratch;
  void* ws = scratch.getBytes(
      cpu::winogradWorkspaceBytes(g, c, c, filters.u[0].isa(), cpu::poolThreads()));
  for (auto _ : state) {
    cpu::winogradConv2d(g, 1, c, hw, hw, c, x.data(), filters, y.data(), ws);
    benchmark::ClobberMemory();
  }
  setConvFlops(state, c, c, hw, hw);
}

void BM_Conv3x3Im2colGemm(benchmark::State& state) {
  const int64_t c = state.range(0), hw = state.range(1);
  cpu::ThreadPool pool(static_cast<int>(state.range(2)));
  cpu::ThreadPoolScope scope(&pool);
  const std::vector<float> x = randomFloats(c * hw * hw, 1), w = randomFloats(c * c * 9, 2);
  std::vector<float> y(static_cast<size_t>(c * hw * hw)), col(static_cast<size_t>(c * 9 * hw * hw));
  const cpu::PackedMatrix packed = cpu::packA(false, c, c * 9, w.data(), c * 9);
  const ir::ConvGeometry g = same3x3(hw, hw);
  ScratchFloats scratch;
  void* ws = scratch.getBytes(cpu::sgemmWorkspaceBytes(packed, hw * hw, cpu::poolThreads()));
  for (auto _ : state) {
    cpu::im2col(x.data(), c, Shape{hw, hw}, Shape{hw, hw}, g, col.data());
    cpu::sgemmPacked(packed, hw * hw, 1.0f, false, col.data(), hw * hw, 0.0f, y.data(), hw * hw,
                     ws);
    benchmark::ClobberMemory();
  }
  setConvFlops(state, c, c, hw, hw);
}

void resnetShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "HW", "threads"});
  for (const auto& s : {std::pair<int64_t, int64_t>{64, 56}, {128, 28}, {256, 14}, {512, 7}}) {
    for (int threads : {1, 2}) b->Args({s.first, s.second, threads});
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Conv3x3Winograd)->Apply(resnetShapes);
BENCHMARK(BM_Conv3x3Im2colGemm)->Apply(resnetShapes);

}  // namespace
}  // namespace kiln::bench
