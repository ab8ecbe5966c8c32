#include "build/layer_timing.h"

#include <algorithm>
#include <chrono>

#include "build/profiles.h"
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

double timeKernelOnce(const ir::Node& node, const ir::OpSchema& schema, const cpu::KernelFn& kernel,
                      const std::vector<const Tensor*>& inputs) {
  const auto start = std::chrono::steady_clock::now();
  runNode(node, schema, kernel, inputs, nullptr);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace kiln::build
