#include "build/precision.h"

#include <set>

#include "backends/cpu/cpu_isa.h"
#include "build/network_impl.h"
#include "ir/precision.h"
#include "opt/passes.h"

namespace kiln::build {
namespace {

// The layers that have BF16 kernels (bf16_candidates.h, nchwc BF16 convolution).
bool bf16Eligible(const ir::Node& node) {
  static const std::set<std::pair<std::string, std::string>> kOps = {
      {"", "Conv"},          {"", "MatMul"},        {"", "Gemm"},         {"kiln", "FusedMatMul"},
      {"kiln", "FusedConv"}, {"kiln", "NchwcConv"}, {"", "ConvTranspose"}};
  return kOps.count({node.domain, node.opType}) > 0;
}

// The layers that have FP16-weight kernels (f16w_candidates.h).
bool fp16Eligible(const ir::Node& node) {
  return (node.domain.empty() && (node.opType == "MatMul" || node.opType == "Gemm")) ||
         (node.domain == "kiln" && node.opType == "FusedMatMul");
}

// What a precision is called in kernel ids, attributes and messages.
struct PrecisionKind {
  const char* attr;     // ir::kPrecisionBf16 / kPrecisionFp16
  const char* prefix;   // of its kernels' ids
  const char* kernels;  // for messages
  DataType type;
};
constexpr PrecisionKind kBf16Kind{ir::kPrecisionBf16, "bf16_", "BF16", DataType::kBFloat16};
constexpr PrecisionKind kFp16Kind{ir::kPrecisionFp16, "f16w_", "FP16-weight", DataType::kFloat16};

// Ops that only move or relabel values: a layer before them feeds what comes after them.
bool shapeOnly(const ir::Node& node) {
  static const std::set<std::string> kOps = {"Reshape", "Flatten",   "Transpose",
                                             "Squeeze", "Unsqueeze", "Identity"};
  return node.domain.empty() && kOps.count(node.opType) > 0;
}

// Nodes whose output reaches a graph output only through a Softmax / LogSoftmax (and shape-only
// ops): a classifier's logits, kept FP32 as their rounding moves the probabilities most.
std::set<int> finalSoftmaxInputs(const ir::Graph& g) {
  std::set<int> producers;
  for (int out : g.outputs) {
    int node = g.value(out).producer;
    while (node >= 0 && shapeOnly(g.nodes[static_cast<size_t>(node)]))
      node = g.value(g.nodes[static_cast<size_t>(node)].inputs[0]).producer;
    if (node < 0) continue;
    const ir::Node& softmax = g.nodes[static_cast<size_t>(node)];
    if (!softmax.domain.empty() || (softmax.opType != "Softmax" && softmax.opType != "LogSoftmax"))
      continue;
    int producer = g.value(softmax.inputs[0]).producer;
    while (producer >= 0 && shapeOnly(g.nodes[static_cast<size_t>(producer)])) {
      producer = g.value(g.nodes[static_cast<size_t>(producer)].inputs[0]).producer;
    }
    if (producer >= 0) producers.insert(producer);
  }
  return producers;
}

std::string constraintFlagName(PrecisionConstraints c) {
  return c == PrecisionConstraints::kObey ? "kOBEY_PRECISION_CONSTRAINTS"
                                          : "kPREFER_PRECISION_CONSTRAINTS";
}

}  // namespace

DataType pinnedPrecision(const ir::Node& node, const PrecisionRequest& request, std::string* who) {
  std::vector<std::string> names = opt::fusedFrom(node);
  if (names.empty()) names.push_back(node.name);
  for (const std::string& name : names) {
    auto it = request.layers.find(name);
    if (it == request.layers.end()) continue;
    *who = name;
    return it->second;
  }
  return DataType::kUndefined;
}

PrecisionRequest precisionRequest(const std::vector<LayerRecord>& layers, const ir::Graph& graph,
                                  const BuilderConfig& config, ILogger& logger) {
  PrecisionRequest request;
  request.bf16 = config.getFlag(BuilderFlag::kBF16);
  request.fp16 = config.getFlag(BuilderFlag::kFP16);
  if (config.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS)) {
    request.constraints = PrecisionConstraints::kObey;
  } else if (config.getFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS)) {
    request.constraints = PrecisionConstraints::kPrefer;
  }
  bool ignored = false;
  for (const LayerRecord& layer : layers) {
    if (!layer.precisionSet) continue;
    const DataType p = layer.precision;
    const bool fp16 = p == DataType::kFloat16, bf16 = p == DataType::kBFloat16;
    const bool int8 = p == DataType::kInt8 || p == DataType::kUint8;
    if (p != DataType::kFloat32 && !fp16 && !bf16 && !int8) {
      throw Error(ErrorCode::kInvalidArgument,
                  "layer '" + layer.name + "' asks for precision " + dataTypeName(p) +
                      "; layers compute in float32, bfloat16, float16 or int8");
    }
    const char* flag = fp16 ? "kFP16" : bf16 ? "kBF16" : int8 ? "kINT8" : nullptr;
    if ((fp16 && !config.getFlag(BuilderFlag::kFP16)) || (bf16 && !request.bf16) ||
        (int8 && !config.getFlag(BuilderFlag::kINT8))) {
      throw Error(ErrorCode::kInvalidArgument, "layer '" + layer.name + "' asks for precision " +
                                                   dataTypeName(p) + " but the builder flag " +
                                                   flag + " is not set");
    }
    if (request.constraints == PrecisionConstraints::kNone) {
      ignored = true;
      continue;
    }
    if (int8) {
      logger.log(Severity::kWARNING,
                 "layer '" + layer.name + "' asks for " + dataTypeName(p) +
                     "; kiln has no kernels of that precision for it here, it runs in float32");
      continue;
    }
    for (int node : layer.nodes) request.layers[graph.nodes[static_cast<size_t>(node)].name] = p;
  }
  if (ignored) {
    logger.log(Severity::kWARNING,
               "layer precisions are ignored without kOBEY_PRECISION_CONSTRAINTS or "
               "kPREFER_PRECISION_CONSTRAINTS (as in TensorRT)");
  }
  if (config.getFlag(BuilderFlag::kINT8) && !config.getInt8Calibrator()) {
    logger.log(Severity::kWARNING,
               "kINT8 without a calibrator: only the network's own Q/DQ nodes quantize; other "
               "layers run in float32");
  }
  if (!config.getFlag(BuilderFlag::kINT8) && config.getInt8Calibrator()) {
    logger.log(Severity::kWARNING,
               "an INT8 calibrator is set but not the builder flag kINT8: it is not used");
  }
  return request;
}

void pinFloatLayers(ir::Graph& graph, const PrecisionRequest& request) {
  for (ir::Node& node : graph.nodes) {
    auto it = request.layers.find(node.name);
    if (it != request.layers.end() && it->second == DataType::kFloat32)
      node.attrs[ir::kPrecisionAttr] = ir::kPrecisionFp32;
  }
}

std::vector<std::string> markPrecisions(ir::Graph& graph, const PrecisionRequest& request,
                                        ILogger& logger) {
  std::vector<std::string> decisions;
  bool bf16 = request.bf16;
  if (bf16 && !cpu::cpuSupports(cpu::CpuIsa::kAvx512Bf16)) {
    const std::string reason = cpu::cpuHas(cpu::CpuIsa::kAvx512Bf16)
                                   ? "kernels are limited below avx512bf16"
                                   : "this CPU has no AVX512_BF16 (vdpbf16ps)";
    for (const auto& [name, p] : request.layers) {
      if (p == DataType::kBFloat16 && request.constraints == PrecisionConstraints::kObey) {
        throw Error(ErrorCode::kInvalidArgument, "layer '" + name + "' is constrained to bf16 (" +
                                                     constraintFlagName(request.constraints) +
                                                     ") but " + reason);
      }
    }
    logger.log(Severity::kWARNING, "kBF16: " + reason + "; every layer runs in float32");
    bf16 = false;
  }
  if (!bf16 && !request.fp16) return decisions;
  const std::set<int> logits = finalSoftmaxInputs(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Node& node = graph.nodes[i];
    std::string who;
    const DataType pinned = pinnedPrecision(node, request, &who);
    // BF16 where it can compute the layer, else FP16 weights; a layer asked for fp16 is marked
    // fp16 even without an FP16-weight kernel, for settlePrecisions to report.
    const PrecisionKind* kind = nullptr;
    if (request.fp16 && pinned == DataType::kFloat16) {
      kind = &kFp16Kind;
    } else if (bf16 && bf16Eligible(node)) {
      kind = &kBf16Kind;
    } else if (request.fp16 && fp16Eligible(node)) {
      kind = &kFp16Kind;
    }
    if (!kind) continue;
    std::string decision;
    if (pinned == DataType::kFloat32) {
      decision = "fp32: layer '" + who + "' is constrained to fp32";
    } else if (pinned != kind->type && logits.count(static_cast<int>(i))) {
      decision = "fp32: it feeds the network's final softmax";
    }
    node.attrs[ir::kPrecisionAttr] = decision.empty() ? kind->attr : ir::kPrecisionFp32;
    if (decision.empty()) {
      const std::string name = kind->attr;
      decision = pinned == kind->type ? name + ": constrained to " + name : name;
    }
    decisions.push_back(node.label() + ": precision " + decision);
    logger.log(Severity::kVERBOSE, decisions.back());
  }
  return decisions;
}

std::vector<std::string> settlePrecisions(ir::Graph& graph,
                                          const std::vector<KernelChoice>& choices,
                                          const PrecisionRequest& request, ILogger& logger) {
  std::vector<std::string> decisions;
  for (size_t i = 0; i < graph.nodes.size() && i < choices.size(); ++i) {
    ir::Node& node = graph.nodes[i];
    const std::string precision = ir::nodePrecision(node);
    const PrecisionKind* kind = precision == ir::kPrecisionBf16   ? &kBf16Kind
                                : precision == ir::kPrecisionFp16 ? &kFp16Kind
                                                                  : nullptr;
    if (!kind || choices[i].id.rfind(kind->prefix, 0) == 0) continue;
    std::string reasons;
    for (const auto& [id, reason] : choices[i].declined)
      if (id.rfind(kind->prefix, 0) == 0)
        reasons += (reasons.empty() ? "" : "; ") + id + ": " + reason;
    std::string who;
    if (pinnedPrecision(node, request, &who) == kind->type) {
      const std::string message = "layer '" + who + "' is constrained to " + kind->attr +
                                  " but no " + kind->kernels + " kernel takes " + node.label() +
                                  " (" + reasons + ")";
      if (request.constraints == PrecisionConstraints::kObey)
        throw Error(ErrorCode::kInvalidArgument, message);
      logger.log(Severity::kWARNING, message + "; it runs in float32");
    }
    node.attrs[ir::kPrecisionAttr] = ir::kPrecisionFp32;
    decisions.push_back(node.label() + ": precision fp32: no " + kind->kernels +
                        " kernel takes it (" + reasons + ")");
    logger.log(Severity::kVERBOSE, decisions.back());
  }
  return decisions;
}

std::map<std::string, DataType> parseLayerPrecisions(const std::string& text) {
  static const std::map<std::string, DataType> kTypes = {{"fp32", DataType::kFloat32},
                                                         {"bf16", DataType::kBFloat16},
                                                         {"fp16", DataType::kFloat16},
                                                         {"int8", DataType::kInt8}};
  std::map<std::string, DataType> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t colon = entry.rfind(':');
    auto type = colon == std::string::npos ? kTypes.end() : kTypes.find(entry.substr(colon + 1));
    if (colon == 0 || type == kTypes.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "layer precision '" + entry +
                      "' is not NAME:TYPE with TYPE one of fp32, bf16, fp16, int8");
    }
    out[entry.substr(0, colon)] = type->second;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace kiln::build
