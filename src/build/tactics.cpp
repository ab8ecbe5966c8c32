#include "build/tactics.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <type_traits>
#include <variant>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/thread_pool.h"
#include "build/layer_timing.h"
#include "ir/op_schema.h"
#include "ir/precision.h"
#include "ir/sym_shape.h"

namespace kiln::build {
namespace {

// The layers whose candidates are timed: convolutions, products, attention (in any domain).
bool isTimedOp(const ir::Node& node) {
  static const std::set<std::string> ops = {"Conv",      "FusedConv",      "NchwcConv",
                                            "MatMul",    "Gemm",           "FusedMatMul",
                                            "Attention", "FusedAttention", "MultiHeadAttention"};
  return ops.count(node.opType) > 0;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", v);
  return text;
}

template <typename T>
std::string listText(const std::vector<T>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += ",";
    if constexpr (std::is_same_v<T, float>) {
      s += number(values[i]);
    } else if constexpr (std::is_same_v<T, std::string>) {
      s += values[i];
    } else {
      s += std::to_string(values[i]);
    }
  }
  return s + "]";
}

// An attribute as the signature spells it: values of numbers and strings, dtype and shape of a
// tensor, "graph" for a subgraph.
std::string attributeText(const ir::Attribute& a) {
  struct Visitor {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(float v) const { return number(v); }
    std::string operator()(const std::string& v) const { return "'" + v + "'"; }
    std::string operator()(const Tensor& t) const {
      return std::string(dataTypeName(t.dtype())) + "[" + shapeToString(t.shape()) + "]";
    }
    std::string operator()(const std::shared_ptr<ir::Graph>&) const { return "graph"; }
    std::string operator()(const std::vector<int64_t>& v) const { return listText(v); }
    std::string operator()(const std::vector<float>& v) const { return listText(v); }
    std::string operator()(const std::vector<std::string>& v) const { return listText(v); }
    std::string operator()(const std::vector<Tensor>& v) const {
      return "tensors" + std::to_string(v.size());
    }
    std::string operator()(const std::vector<std::shared_ptr<ir::Graph>>& v) const {
      return "graphs" + std::to_string(v.size());
    }
  };
  return std::visit(Visitor{}, a);
}

std::string layerSignature(const ir::Graph& concrete, const ir::Node& node) {
  std::string s = (node.domain.empty() ? std::string("ai.onnx") : node.domain) +
                  "::" + node.opType + "-" + std::to_string(node.opset) + "(";
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    if (k) s += ",";
    const int id = node.inputs[k];
    if (id == ir::kNoValue) continue;
    const ir::Value& v = concrete.value(id);
    s += std::string(dataTypeName(v.type.dtype)) + "[" +
         (v.type.shape ? ir::symShapeToString(*v.type.shape) : "?") + "]";
    if (v.constant && !concrete.isGraphInput(id))
      s += "c";  // a constant (weights) rather than an activation
  }
  s += "){";
  bool first = true;
  for (const auto& [name, value] : node.attrs) {
    s += (first ? "" : ",") + name + "=" + attributeText(value);
    first = false;
  }
  return s + "}";
}

struct Timed {
  const cpu::KernelCandidate* candidate;
  std::string key;
  std::optional<double> ms;  // known time (cached, or measured)
  std::string failure;       // why it could not be timed
};

// Makes each candidate's kernel once, runs each once to warm up, then `repeats` rounds of one run
// of each in turn; the median of a candidate's rounds is its time. Returns the runs made.
int64_t timeCandidates(const ir::Node& node, const ir::OpSchema& schema,
                       const cpu::KernelCreateInfo& info, const std::vector<const Tensor*>& inputs,
                       int repeats, std::vector<Timed*>& todo) {
  std::vector<cpu::Kernel> kernels(todo.size());
  std::vector<KernelRuns> timed;
  timed.reserve(todo.size());
  for (const cpu::Kernel& k : kernels) timed.emplace_back(node, schema, k, inputs);
  std::vector<std::vector<double>> seconds(todo.size());
  std::vector<bool> ok(todo.size(), true);
  int64_t runs = 0;
  auto attempt = [&](size_t i, bool record) {
    if (!ok[i]) return;
    try {
      const double s = timed[i].timeOnce();
      ++runs;
      if (record) seconds[i].push_back(s);
    } catch (const Error& e) {
      ok[i] = false;
      todo[i]->failure = std::string("failed when timed: ") + e.what();
    }
  };
  for (size_t i = 0; i < todo.size(); ++i) {
    try {
      kernels[i] = todo[i]->candidate->create(info);
    } catch (const Error& e) {
      ok[i] = false;
      todo[i]->failure = std::string("failed when made: ") + e.what();
    }
    attempt(i, false);
  }
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < todo.size(); ++i) attempt(i, true);
  for (size_t i = 0; i < todo.size(); ++i)
    if (ok[i]) todo[i]->ms = median(seconds[i]) * 1e3;
  return runs;
}

std::string ms(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms", v);
  return text;
}

}  // namespace

int tacticRepeats(int level) {
  static const int repeats[] = {0, 3, 5, 7, 11, 15};
  return repeats[std::clamp(level, 0, 5)];
}

std::string tacticKey(const ir::Graph& concrete, const ir::Node& node, int threads,
                      const std::string& kernel) {
  return timingCacheCpuKey() + ";kiln=" + plan::kKilnVersion +
         ";threads=" + std::to_string(threads) + ";layer=" + layerSignature(concrete, node) +
         ";kernel=" + kernel;
}

std::vector<LayerTactics> selectTactics(const ir::Graph& graph, const plan::Profile& profile,
                                        const TacticOptions& options, ILogger& logger,
                                        BuildReport& report) {
  std::vector<LayerTactics> out(graph.nodes.size());
  if (options.level <= 0) return out;
  if (options.cache && options.cache->entriesForOtherCpus() > 0) {
    logger.log(Severity::kWARNING,
               "timing cache: " + std::to_string(options.cache->entriesForOtherCpus()) + " of " +
                   std::to_string(options.cache->size()) +
                   " entries were timed on another CPU and are not used on this one (" +
                   timingCacheCpuKey() + ")");
  }
  const std::optional<ir::Graph> concrete = graphAtOptShapes(graph, profile);
  if (!concrete) {
    logger.log(
        Severity::kWARNING,
        "tactics: shapes at the opt profile could not be inferred; heuristics choose every kernel");
    return out;
  }
  const int threads = std::max(options.threads, 1);
  cpu::ThreadPool pool(threads);
  cpu::ThreadPoolScope scope(threads > 1 ? &pool : nullptr);
  const cpu::KernelRegistry& registry = cpu::KernelRegistry::global();
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    // A layer marked bf16 or fp16 takes its precision's kernel, the first of its family.
    const std::string precision = ir::nodePrecision(node);
    if (!isTimedOp(node) || precision == ir::kPrecisionBf16 || precision == ir::kPrecisionFp16)
      continue;
    const cpu::KernelCreateInfo info = timingCreateInfo(graph, node);
    cpu::KernelAlternatives alternatives = registry.alternatives(info);
    // Below level 3 the any-dtype kernels are timed only when nothing more specific can run.
    const bool specific = std::find(alternatives.generic.begin(), alternatives.generic.end(),
                                    false) != alternatives.generic.end();
    std::vector<Timed> timed;
    for (size_t k = 0; k < alternatives.supporting.size(); ++k) {
      if (alternatives.generic[k] && specific && options.level < 3) {
        alternatives.declined.emplace_back(
            alternatives.supporting[k]->id,
            "not timed below optimization level 3 (any-dtype kernel)");
        continue;
      }
      timed.push_back({alternatives.supporting[k],
                       tacticKey(*concrete, node, threads, alternatives.supporting[k]->id),
                       {},
                       {}});
    }
    if (timed.size() < 2) continue;
    std::vector<Timed*> todo;
    for (Timed& t : timed) {
      if (options.cache) t.ms = options.cache->query(t.key);
      if (!t.ms) todo.push_back(&t);
    }
    LayerTactics& lt = out[n];
    if (todo.empty()) {
      lt.source = "timing cache";
      ++report.tacticLayersFromCache;
    } else {
      std::mt19937 rng(
          1);  // every layer's inputs from the same seed: deterministic whatever the order
      std::vector<Tensor> made;
      const auto inputs = timingInputs(*concrete, node, info, rng, made);
      const ir::OpSchema* schema =
          ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
      if (!inputs || !schema) continue;  // not timeable here: the heuristics choose
      lt.source = "timed";
      ++report.tacticLayersTimed;
      report.tacticRuns +=
          timeCandidates(node, *schema, info, *inputs, tacticRepeats(options.level), todo);
      if (options.cache)
        for (Timed* t : todo)
          if (t->ms) options.cache->update(t->key, *t->ms);
    }
    double best = std::numeric_limits<double>::infinity();
    std::string line = node.label() + ": tactics (" + lt.source + ")";
    for (const Timed& t : timed) {
      lt.timings.push_back({t.candidate->id, t.ms ? *t.ms : -1.0, t.failure});
      line += "\n    " + t.candidate->id + " " + (t.ms ? ms(*t.ms) : t.failure);
      if (t.ms && *t.ms < best) {
        best = *t.ms;
        lt.kernel = t.candidate->id;
      }
    }
    for (const auto& [id, reason] : alternatives.declined) lt.timings.push_back({id, -1.0, reason});
    if (lt.kernel.empty()) {  // none could be timed: the heuristics choose
      lt = LayerTactics{};
      continue;
    }
    logger.log(Severity::kVERBOSE, line + "\n    fastest: " + lt.kernel);
  }
  return out;
}

}  // namespace kiln::build
