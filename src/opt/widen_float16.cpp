// Runs the float16 interior of a graph in float32 (see passes.h, widenFloat16Interior): kiln has
// no float16 arithmetic kernels, so a float16 tensor between two layers would cost a conversion
// on each side of every layer and keep the layer off the float32 fusions and kernels.
#include <immintrin.h>

#include <map>
#include <set>

#include "core/half.h"
#include "ir/op_schema.h"
#include "opt/float16_rules.h"
#include "opt/passes.h"
#include "opt/rewrite_util.h"

namespace kiln::opt {
namespace {

constexpr int64_t kOnnxFloat = 1;     // TensorProto.FLOAT
constexpr int64_t kOnnxFloat16 = 10;  // TensorProto.FLOAT16

bool isFloat16Tensor(const ir::Value& v) {
  return v.type.dtype == DataType::kFloat16 && !v.type.isSequence && !v.type.isOptional;
}

// The float32 copy of a float16 tensor (exact: every float16 value is a float32 one).
Tensor widenTensor(const Tensor& half) {
  Tensor wide(DataType::kFloat32, half.shape());
  const auto* src = half.data<uint16_t>();
  float* dst = wide.data<float>();
  const int64_t n = half.numel();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = halfBitsToFloat(src[i]);
  return wide;
}

class Float16Widening {
 public:
  explicit Float16Widening(ir::Graph& graph) : g_(graph), nodeCount_(graph.nodes.size()) {}

  // Returns the number of Casts removed.
  int run() {
    const std::vector<std::vector<int>> consumers = consumersOf(g_);
    wide_.assign(g_.nodes.size(), false);
    for (size_t i = 0; i < nodeCount_; ++i) wide_[i] = computesWideInFloat32(g_, g_.nodes[i]);
    if (!anyFloat16Touched()) return 0;
    const std::vector<bool> wideValue = wideValues(consumers);
    // Graph outputs keep their value (name, float16 type): the producer writes a float32 copy.
    for (int& out : g_.outputs) {
      if (!wideValue[static_cast<size_t>(out)]) continue;
      const int id = out;
      const int f32 = g_.addValue(uniqueName(g_.value(id).name + "_float32"), g_.value(id).type);
      g_.value(f32).type.dtype = DataType::kFloat32;
      ir::Node& producer = g_.nodes[static_cast<size_t>(g_.value(id).producer)];
      for (int& o : producer.outputs)
        if (o == id) o = f32;
      readAs32_[id] = f32;
      addCast(f32, id, kOnnxFloat16, producer);
    }
    for (size_t v = 0; v < wideValue.size(); ++v) {
      if (!wideValue[v] || readAs32_.count(static_cast<int>(v))) continue;
      ir::Value& value = g_.values[v];
      value.type.dtype = DataType::kFloat32;
      if (value.constant) value.constant = widenTensor(*value.constant);
      readAs32_[static_cast<int>(v)] = static_cast<int>(v);
    }
    for (size_t i = 0; i < nodeCount_; ++i) rewireInputs(i);
    for (size_t i = 0; i < nodeCount_; ++i) {
      ir::Node& node = g_.nodes[i];
      if (!wide_[i]) continue;
      if (node.opType == "Cast" && g_.value(node.outputs[0]).type.dtype == DataType::kFloat32)
        node.attrs["to"] = kOnnxFloat;
      if (node.opType == "ConstantOfShape")
        node.attrs["value"] = widenTensor(std::get<Tensor>(node.attrs.at("value")));
    }
    ir::sortTopologically(g_);
    ir::inferShapes(g_);
    return removeIdentityCasts();
  }

 private:
  bool anyFloat16Touched() const {
    for (size_t i = 0; i < nodeCount_; ++i) {
      if (!wide_[i]) continue;
      for (int id : g_.nodes[i].inputs)
        if (id != ir::kNoValue && isFloat16Tensor(g_.value(id))) return true;
      for (int id : g_.nodes[i].outputs)
        if (id != ir::kNoValue && isFloat16Tensor(g_.value(id))) return true;
    }
    return false;
  }

  // Float16 values that become float32: outputs of widened nodes, and constants that only
  // widened nodes read. Graph inputs keep their declared type.
  std::vector<bool> wideValues(const std::vector<std::vector<int>>& consumers) const {
    std::vector<bool> wide(g_.values.size(), false);
    for (size_t v = 0; v < g_.values.size(); ++v) {
      const ir::Value& value = g_.values[v];
      if (!isFloat16Tensor(value) || g_.isGraphInput(static_cast<int>(v))) continue;
      if (value.producer >= 0) {
        wide[v] = wide_[static_cast<size_t>(value.producer)];
      } else if (value.constant && !isGraphOutput(g_, static_cast<int>(v))) {
        bool allWide = !consumers[v].empty();
        for (int reader : consumers[v]) allWide = allWide && wide_[static_cast<size_t>(reader)];
        wide[v] = allWide;
      }
    }
    return wide;
  }

  // Widened nodes read the float32 form of their float16 inputs, the others the float16 form.
  void rewireInputs(size_t i) {
    for (size_t k = 0; k < g_.nodes[i].inputs.size(); ++k) {
      const int id = g_.nodes[i].inputs[k];
      if (id == ir::kNoValue) continue;
      const bool is32 = readAs32_.count(id) > 0;
      const bool is16 = isFloat16Tensor(g_.value(id));
      int read = id;
      if (wide_[i] && is32) {
        read = readAs32_[id];
      } else if (wide_[i] && is16) {
        read = float32Form(id, i);
      } else if (!wide_[i] && is32 && !is16) {
        read = float16Form(id, i);
      }
      g_.nodes[i].inputs[k] = read;
    }
  }

  int float32Form(int id, size_t reader) {
    auto it = readAs32_.find(id);
    if (it != readAs32_.end()) return it->second;
    const ir::Value& v = g_.value(id);
    int f32;
    if (v.constant && !g_.isGraphInput(id)) {
      f32 = addConstant(g_, v.name + "_float32", widenTensor(*v.constant));
    } else {
      ir::TypeInfo type = v.type;
      type.dtype = DataType::kFloat32;
      f32 = g_.addValue(uniqueName(v.name + "_float32"), type);
      addCast(id, f32, kOnnxFloat, g_.nodes[reader]);
    }
    readAs32_[id] = f32;
    return f32;
  }

  int float16Form(int id, size_t reader) {
    auto it = readAs16_.find(id);
    if (it != readAs16_.end()) return it->second;
    ir::TypeInfo type = g_.value(id).type;
    type.dtype = DataType::kFloat16;
    const int f16 = g_.addValue(uniqueName(g_.value(id).name + "_float16"), type);
    addCast(id, f16, kOnnxFloat16, g_.nodes[reader]);
    readAs16_[id] = f16;
    return f16;
  }

  void addCast(int from, int to, int64_t onnxType, const ir::Node& near) {
    ir::Node cast;
    cast.name = uniqueNodeName(g_.value(to).name + "_cast");
    cast.opType = "Cast";
    cast.opset = near.domain.empty() && near.opset > 0 ? near.opset : 13;
    cast.inputs = {from};
    cast.outputs = {to};
    cast.attrs["to"] = onnxType;
    nodeNames_.insert(cast.name);
    g_.nodes.push_back(std::move(cast));
  }

  // Removes Casts whose input already has the target type: readers read the input instead, or,
  // for a graph output, its producer writes the output when nothing else reads the input.
  int removeIdentityCasts() {
    const std::vector<std::vector<int>> consumers = consumersOf(g_);
    std::vector<bool> removed(g_.nodes.size(), false);
    std::vector<int> replacement(g_.values.size());
    for (size_t v = 0; v < replacement.size(); ++v) replacement[v] = static_cast<int>(v);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      ir::Node& node = g_.nodes[i];
      for (int& id : node.inputs)
        if (id != ir::kNoValue) id = replacement[static_cast<size_t>(id)];
      if (node.opType != "Cast" || !node.domain.empty()) continue;
      const int in = node.inputs[0], out = node.outputs[0];
      const ir::Value& src = g_.value(in);
      if (src.type.dtype != g_.value(out).type.dtype || src.type.isSequence) continue;
      if (!isGraphOutput(g_, out)) {
        replacement[static_cast<size_t>(out)] = in;
        removed[i] = true;
      } else if (src.producer >= 0 &&
                 consumers[static_cast<size_t>(in)] == std::vector<int>{static_cast<int>(i)} &&
                 !isGraphOutput(g_, in)) {
        for (int& o : g_.nodes[static_cast<size_t>(src.producer)].outputs)
          if (o == in) o = out;
        removed[i] = true;
      }
    }
    return dropNodes(g_, removed);
  }

  std::string uniqueName(const std::string& base) const {
    std::string name = base;
    for (int k = 1; g_.findValue(name) >= 0; ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  std::string uniqueNodeName(const std::string& base) {
    if (nodeNames_.empty())
      for (const ir::Node& n : g_.nodes) nodeNames_.insert(n.name);
    std::string name = base;
    for (int k = 1; nodeNames_.count(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  ir::Graph& g_;
  const size_t nodeCount_;       // the graph's own nodes (the Casts added come after them)
  std::vector<bool> wide_;       // per node: computes in float32
  std::map<int, int> readAs32_;  // float16 value -> the float32 value widened nodes read
  std::map<int, int> readAs16_;  // float32 value -> the float16 value other nodes read
  std::set<std::string> nodeNames_;
};

}  // namespace

int widenFloat16Interior(ir::Graph& graph) { return Float16Widening(graph).run(); }

}  // namespace kiln::opt
