// kiln::NchwcConv (direct convolution in the blocked layout) against the NCHW FusedConv kernel
// (im2col + GEMM, Winograd, depthwise) on the layers of ResNet-50, MobileNetV2, EfficientNet and
// SRCNN, both with bias and Relu (SiLU where named) and both run through their registered kernel
// factories exactly as the engine runs them (weights packed when the kernel is made). GFLOPS counts
// the direct convolution's 2 * Co * Ci/group * kH * kW * Ho * Wo; compare the two on the same
// shape/threads. Filter by shape with e.g. --benchmark_filter='shape:5/'.
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/nchwc.h"
#include "random_data.h"

namespace kiln::bench {
namespace {

using kiln::testing::randomFloats;

struct ConvShape {
  const char* name;
  int64_t ci, co, hw, k, stride, pad;
  bool depthwise = false, plainInput = false;
  const char* activation = "Relu";
  int64_t out() const { return (hw + 2 * pad - k) / stride + 1; }
  double gflop() const {
    return 2.0 * double(co) * double(depthwise ? 1 : ci) * double(k * k) * double(out() * out()) *
           1e-9;
  }
};

const std::vector<ConvShape>& shapes() {
  static const std::vector<ConvShape> s{
      {"resnet 64->64 3x3 56", 64, 64, 56, 3, 1, 1},
      {"resnet 64->256 1x1 56", 64, 256, 56, 1, 1, 0},
      {"resnet 256->64 1x1 56", 256, 64, 56, 1, 1, 0},
      {"resnet 128->128 3x3 28", 128, 128, 28, 3, 1, 1},
      {"resnet 256->256 3x3 14", 256, 256, 14, 3, 1, 1},
      {"resnet 512->512 3x3 7", 512, 512, 7, 3, 1, 1},
      {"resnet 1024->2048 1x1 s2 14", 1024, 2048, 14, 1, 2, 0},
      {"resnet conv1 3->64 7x7 s2 224", 3, 64, 224, 7, 2, 3, false, true},
      {"mobilenet 3->32 3x3 s2 224", 3, 32, 224, 3, 2, 1, false, true},
      {"mobilenet 24->144 1x1 56", 24, 144, 56, 1, 1, 0},
      {"mobilenet 144->24 1x1 56", 144, 24, 56, 1, 1, 0},
      {"mobilenet 32->192 1x1 28", 32, 192, 28, 1, 1, 0},
      {"mobilenet dw 144 3x3 s2 56", 144, 144, 56, 3, 2, 1, true},
      {"mobilenet dw 960 3x3 7", 960, 960, 7, 3, 1, 1, true},
      {"efficientnet dw 240 5x5 28", 240, 240, 28, 5, 1, 2, true},
      {"efficientnet 40->240 1x1 28 SiLU", 40, 240, 28, 1, 1, 0, false, false, "SiLU"},
      {"srcnn 3->64 9x9 768", 3, 64, 768, 9, 1, 4, false, true},
      {"srcnn 64->32 1x1 768", 64, 32, 768, 1, 1, 0},
      {"squeezenet conv1 3->64 3x3 s2 224", 3, 64, 224, 3, 2, 0, false, true},
      {"mobilenet 16->96 1x1 112", 16, 96, 112, 1, 1, 0},
      {"mobilenet 32->16 1x1 112", 32, 16, 112, 1, 1, 0},
      {"mobilenet 960->320 1x1 7", 960, 320, 7, 1, 1, 0},
      {"squeezenet 512->1000 1x1 13", 512, 1000, 13, 1, 1, 0},
      {"squeezenet 16->64 3x3 55", 16, 64, 55, 3, 1, 1},
      {"squeezenet 64->256 3x3 13", 64, 256, 13, 3, 1, 1},
  };
  return s;
}

ir::TypeInfo floatType(const Shape& shape) {
  return ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(shape)};
}

// One node run through the kernel registry as the engine runs it: made once (weights packed),
// then called with the same input and output tensors.
class RegisteredKernel {
 public:
  RegisteredKernel(const std::string& domain, const std::string& op, const ConvShape& s,
                   const Shape& xShape, const Shape& yShape)
      : x_(Tensor::fromVector<float>(DataType::kFloat32, xShape,
                                     randomFloats(shapeNumel(xShape), 1))),
        w_(Tensor::fromVector<float>(DataType::kFloat32, {s.co, s.depthwise ? 1 : s.ci, s.k, s.k},
                                     randomFloats(s.co * (s.depthwise ? 1 : s.ci) * s.k * s.k, 2))),
        b_(Tensor::fromVector<float>(DataType::kFloat32, {s.co}, randomFloats(s.co, 3))) {
    node_.name = "bench";
    node_.domain = domain;
    node_.opType = op;
    node_.opset = domain.empty() ? 13 : 1;
    node_.attrs["kernel_shape"] = std::vector<int64_t>{s.k, s.k};
    node_.attrs["strides"] = std::vector<int64_t>{s.stride, s.stride};
    node_.attrs["pads"] = std::vector<int64_t>{s.pad, s.pad, s.pad, s.pad};
    if (s.depthwise) node_.attrs["group"] = s.ci;
    node_.attrs["activation"] = std::string(s.activation);
    inTypes_ = {floatType(x_.shape()), floatType(w_.shape()), floatType(b_.shape())};
    outTypes_ = {floatType(yShape)};
    const cpu::KernelFactory* factory = cpu::KernelRegistry::global().find(domain, op);
    if (!factory) throw std::runtime_error("no kernel for " + op);
    cpu::KernelCreateInfo info{
        node_, {&inTypes_[0], &inTypes_[1], &inTypes_[2]}, {nullptr, &w_, &b_}, {}};
    fn_ = (*factory)(info);
    outputs_.resize(1);
  }
  void run() {
    cpu::KernelContext ctx(node_, {&x_, &w_, &b_}, outputs_, outTypes_);
    fn_(ctx);
  }

 private:
  ir::Node node_;
  Tensor x_, w_, b_;
  std::vector<ir::TypeInfo> inTypes_, outTypes_;
  std::vector<Tensor> outputs_;
  cpu::KernelFn fn_;
};

void runShape(benchmark::State& state, bool blocked) {
  const ConvShape& s = shapes().at(static_cast<size_t>(state.range(0)));
  cpu::ThreadPool pool(static_cast<int>(state.range(1)));
  cpu::ThreadPoolScope scope(&pool);
  const int64_t inBlocks = ir::nchwcBlocks(s.ci), outBlocks = ir::nchwcBlocks(s.co), o = s.out();
  const Shape xShape =
      blocked && !s.plainInput ? Shape{1, inBlocks, s.hw, s.hw, 16} : Shape{1, s.ci, s.hw, s.hw};
  const Shape yShape = blocked ? Shape{1, outBlocks, o, o, 16} : Shape{1, s.co, o, o};
  RegisteredKernel kernel("kiln", blocked ? "NchwcConv" : "FusedConv", s, xShape, yShape);
  kernel.run();  // allocates the output
  for (auto _ : state) {
    kernel.run();
    benchmark::ClobberMemory();
  }
  state.SetLabel(s.name);
  state.counters["GFLOPS"] =
      benchmark::Counter(s.gflop(), benchmark::Counter::kIsIterationInvariantRate);
}

// Args: shape index, threads.
void BM_NchwcConv(benchmark::State& state) { runShape(state, true); }
void BM_FusedConvNchw(benchmark::State& state) { runShape(state, false); }

// One thread is timed by its CPU time, so that other processes on a busy machine do not count;
// two threads by the wall clock.
void oneThread(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "threads"});
  for (int64_t i = 0; i < static_cast<int64_t>(shapes().size()); ++i) b->Args({i, 1});
  b->Unit(benchmark::kMillisecond)->MinTime(0.2);
}
void twoThreads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "threads"});
  for (int64_t i = 0; i < static_cast<int64_t>(shapes().size()); ++i) b->Args({i, 2});
  b->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);
}
BENCHMARK(BM_NchwcConv)->Apply(oneThread);
BENCHMARK(BM_FusedConvNchw)->Apply(oneThread);
BENCHMARK(BM_NchwcConv)->Apply(twoThreads);
BENCHMARK(BM_FusedConvNchw)->Apply(twoThreads);

}  // namespace
}  // namespace kiln::bench
