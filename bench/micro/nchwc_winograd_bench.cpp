// Winograd in the blocked layout (nchwc_winograd.h) against the direct NchwcConv kernel on the
// 3x3 stride-1 layers of ResNet-50 (bias + Relu, blocked X and Y), called directly with weights
// packed beforehand. Args: shape, method (0: direct, 2: F(2x2,3x3), 4: F(4x4,3x3)), threads.
// GFLOPS counts the direct convolution's 2 * Co * Ci * 9 * Ho * Wo for every method, so that
// the numbers compare as speeds. Needs AVX-512 for the Winograd rows.
#include <benchmark/benchmark.h>

#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels/nchwc_winograd.h"
#include "backends/cpu/thread_pool.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using kiln::testing::randomFloats;

struct Layer3x3 {
  const char* name;
  int64_t channels, hw;
};

const std::vector<Layer3x3>& layers() {
  static const std::vector<Layer3x3> l{{"resnet layer1 64ch 56x56", 64, 56},
                                       {"resnet layer2 128ch 28x28", 128, 28},
                                       {"resnet layer3 256ch 14x14", 256, 14},
                                       {"resnet layer4 512ch 7x7", 512, 7}};
  return l;
}

void BM_NchwcConv3x3(benchmark::State& state) {
  const Layer3x3& l = layers().at(static_cast<size_t>(state.range(0)));
  const int method = static_cast<int>(state.range(1));
  if (method != 0 && cpu::activeCpuIsa() < cpu::CpuIsa::kAvx512)
    return state.SkipWithError("needs AVX-512");
  cpu::ThreadPool pool(static_cast<int>(state.range(2)));
  cpu::ThreadPoolScope scope(&pool);
  const int64_t c = l.channels, hw = l.hw, blocks = (c + 15) / 16;
  cpu::NchwcConvShape s;
  s.batch = 1;
  s.inChannels = s.outChannels = c;
  s.height = s.width = s.outHeight = s.outWidth = hw;
  s.kernelH = s.kernelW = 3;
  s.padTop = s.padLeft = 1;
  const std::vector<float> x = randomFloats(blocks * hw * hw * 16, 1),
                           w = randomFloats(c * c * 9, 2), bias = randomFloats(blocks * 16, 3);
  std::vector<float> y(static_cast<size_t>(blocks * hw * hw * 16));
  const cpu::NchwcPackedWeights direct =
      method == 0
          ? cpu::packNchwcWeights(w.data(), c, c, 3, 3, cpu::NchwcWeightLayout::kBlockedInput)
          : cpu::NchwcPackedWeights{};
  const cpu::NchwcWinogradWeights winograd =
      method != 0 ? cpu::packNchwcWinogradWeights(w.data(), c, c, method)
                  : cpu::NchwcWinogradWeights{};
  cpu::NchwcConvArgs args;
  args.shape = &s;
  args.x = x.data();
  args.weights = direct.data.get();
  args.bias = bias.data();
  args.act = cpu::Activation{cpu::ActivationKind::kRelu, 0, 0};
  args.y = y.data();
  for (auto _ : state) {
    if (method == 0)
      cpu::nchwcConv(args);
    else
      cpu::nchwcWinogradConv(args, winograd);
    benchmark::ClobberMemory();
  }
  state.SetLabel(l.name);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(c * c * 9 * hw * hw) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void allLayers(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "method", "threads"});
  for (int64_t threads : {1, 2}) {
    for (int64_t i = 0; i < static_cast<int64_t>(layers().size()); ++i) {
      for (int64_t method : {0, 2, 4}) b->Args({i, method, threads});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);
}
BENCHMARK(BM_NchwcConv3x3)->Apply(allLayers);

}  // namespace
}  // namespace kiln::bench
