#include "build/layer_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/thread_pool.h"
#include "build/profiles.h"
#include "core/aligned_memory.h"
#include "engine/executor.h"
#include "ir/sym_shape.h"

namespace kiln::build {

std::optional<ir::Graph> graphAtOptShapes(const ir::Graph& graph, const plan::Profile& profile) {
  ir::Graph g = graph;
  for (const auto& [id, shape] : profileShapes(graph, profile, OptProfileSelector::kOPT)) {
    if (!g.value(id).constant) g.value(id).type.shape = ir::symShapeOf(shape);
  }
  for (ir::Node& node : g.nodes)
    for (int id : node.outputs)
      if (id != ir::kNoValue) g.value(id).type = ir::TypeInfo{};
  try {
    ir::inferShapes(g);
  } catch (const Error&) {
    return std::nullopt;
  }
  return g;
}

cpu::KernelCreateInfo timingCreateInfo(const ir::Graph& g, const ir::Node& node) {
  cpu::KernelCreateInfo info{node, {}, {}, {}, nullptr};
  for (int id : node.inputs) {
    const ir::Value* v = id == ir::kNoValue ? nullptr : &g.value(id);
    info.inputTypes.push_back(v ? &v->type : nullptr);
    info.constants.push_back(v && v->constant && !g.isGraphInput(id) ? &*v->constant : nullptr);
  }
  return info;
}

std::optional<std::vector<const Tensor*>> timingInputs(const ir::Graph& concrete,
                                                       const ir::Node& node,
                                                       const cpu::KernelCreateInfo& info,
                                                       std::mt19937& rng,
                                                       std::vector<Tensor>& made) {
  made.clear();
  made.reserve(node.inputs.size());
  std::vector<const Tensor*> inputs;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const int id = node.inputs[k];
    if (id == ir::kNoValue) {
      inputs.push_back(nullptr);
    } else if (info.constants[k]) {
      inputs.push_back(info.constants[k]);
    } else {
      const ir::TypeInfo& t = concrete.value(id).type;
      const std::optional<Shape> shape = t.shape ? ir::concreteShape(*t.shape) : std::nullopt;
      if (!shape || t.dtype != DataType::kFloat32) return std::nullopt;
      Tensor& x = made.emplace_back(t.dtype, *shape);
      float* p = x.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = dist(rng);
      inputs.push_back(&x);
    }
  }
  return inputs;
}

namespace {

// `bytes` of 64-byte aligned memory, written once so that its pages are mapped.
cpu::OutputStorage touchedStorage(uint64_t bytes) {
  cpu::OutputStorage s;
  if (bytes == 0) return s;
  void* p = allocateAligned(bytes);
  if (!p)
    throw Error(ErrorCode::kOutOfMemory,
                "out of memory allocating " + std::to_string(bytes) + " bytes to time a kernel");
  std::memset(p, 0, bytes);
  s.data = p;
  s.bytes = bytes;
  s.owner = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  return s;
}

}  // namespace

KernelRuns::KernelRuns(const ir::Node& node, const ir::OpSchema& schema, const cpu::Kernel& kernel,
                       const std::vector<const Tensor*>& inputs)
    : node_(node), schema_(schema), kernel_(kernel), inputs_(inputs) {}

double KernelRuns::timeOnce() {
  const auto start = std::chrono::steady_clock::now();
  if (sized_) {
    runNode(node_, schema_, kernel_.run, inputs_, &outputs_, &workspace_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const std::vector<Tensor> outs = runNode(node_, schema_, kernel_.run, inputs_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Tensor& t : outs) outputs_.push_back(touchedStorage(t.byteSize()));
  if (kernel_.workspace) {
    std::vector<const Shape*> shapes;
    for (const Tensor* t : inputs_) shapes.push_back(t ? &t->shape() : nullptr);
    const cpu::ThreadPool* pool = cpu::currentThreadPool();
    workspace_ = touchedStorage(kernel_.workspace(shapes, pool ? pool->size() : 1));
  }
  sized_ = true;
  return seconds;
}

double median(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace kiln::build
