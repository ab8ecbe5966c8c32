#include "backends/cpu/kernel_registry.h"

#include <cctype>

namespace kiln::cpu {

namespace {

const std::string& normalizedDomain(const std::string& domain) {
  static const std::string onnx;
  return domain == "ai.onnx" ? onnx : domain;
}

// "FusedMatMul" -> "fused_mat_mul"; "LSTM" -> "lstm".
std::string snakeCase(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    const bool startsWord =
        std::isupper(c) && i > 0 && !std::isupper(static_cast<unsigned char>(name[i - 1]));
    if (startsWord) out += '_';
    out += static_cast<char>(std::isalnum(c) ? std::tolower(c) : '_');
  }
  return out;
}

bool isNumeric(DataType t) {
  return t != DataType::kUndefined && t != DataType::kBool && t != DataType::kString;
}

// Why a candidate declines the node, "" when it takes it.
std::string declineReason(const KernelCandidate& c, const KernelCreateInfo& info) {
  if (!cpuSupports(c.isa)) return std::string("needs ") + isaFeatureName(c.isa);
  return c.supports ? c.supports(info) : std::string();
}

// Why the heuristics pass over a candidate that supports the node, "" when they pick it.
std::string passedOverReason(const KernelCandidate& c, const KernelCreateInfo& info) {
  if (!c.prefers) return "";
  std::string reason = c.prefers(info);
  return reason.empty() ? reason : "heuristics: " + reason;
}

}  // namespace

std::shared_ptr<const float> savedFloats(const ir::Node& node, const KernelState& state, size_t k,
                                         int64_t floats) {
  const uint64_t expected = static_cast<uint64_t>(floats) * sizeof(float);
  if (k >= state.blobs.size() || state.blobs[k].bytes != expected) {
    throw Error(
        ErrorCode::kInvalidPlan,
        "layer '" + node.name + "': packed weights " + std::to_string(k) + " have " +
            (k < state.blobs.size() ? std::to_string(state.blobs[k].bytes) : std::string("no")) +
            " bytes; its kernel packs " + std::to_string(expected));
  }
  return std::shared_ptr<const float>(state.owner, static_cast<const float*>(state.blobs[k].data));
}

const char* isaFeatureName(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? "avx512f" : cpuIsaName(isa);
}

DataType kernelDtypeKey(const KernelCreateInfo& info) {
  for (const ir::TypeInfo* t : info.inputTypes)
    if (t && !t->isSequence && isNumeric(t->dtype)) return t->dtype;
  return DataType::kUndefined;
}

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry registry;
  return registry;
}

KernelRegistry::Family& KernelRegistry::family(const std::string& domain, const std::string& opType,
                                               DataType dtype) {
  const std::string& d = normalizedDomain(domain);
  for (Family& f : families_)
    if (f.opType == opType && f.domain == d && f.dtype == dtype) return f;
  Family& f = families_.emplace_back();
  f.domain = d;
  f.opType = opType;
  f.dtype = dtype;
  // Chooses within this family's op, not the node's: a kernel may be made for another op's node
  // (QLinearMatMul runs MatMulInteger's kernel, qlinear_integer.cpp).
  f.select = [this, d, opType](const KernelCreateInfo& info) {
    return create(info, selectFor(d, opType, info)).run;
  };
  return f;
}

void KernelRegistry::addCandidate(const std::string& domain, const std::string& opType,
                                  DataType dtype, KernelCandidate candidate) {
  family(domain, opType, dtype).candidates.push_back(std::move(candidate));
}

void KernelRegistry::addGeneric(const std::string& domain, const std::string& opType,
                                KernelFactory factory, KernelMemoryRules rules) {
  addGenericKernel(
      domain, opType,
      [factory = std::move(factory)](const KernelCreateInfo& info) {
        return Kernel{factory(info), {}, {}};
      },
      std::move(rules));
}

void KernelRegistry::addGenericKernel(const std::string& domain, const std::string& opType,
                                      std::function<Kernel(const KernelCreateInfo&)> create,
                                      KernelMemoryRules rules) {
  KernelCandidate c;
  // ONNX Runtime's contrib ops share names with ONNX ops (Gelu, Attention, the blocked layout's
  // Conv): "ms_" and "ms_nchwc_" keep ids apart.
  const char* prefix = domain == "com.microsoft"         ? "ms_"
                       : domain == "com.microsoft.nchwc" ? "ms_nchwc_"
                                                         : "";
  c.id = "any_" + std::string(prefix) + snakeCase(opType) + "_generic";
  c.create = std::move(create);
  c.memory = std::move(rules);
  addCandidate(domain, opType, DataType::kUndefined, std::move(c));
}

std::vector<const KernelRegistry::Family*> KernelRegistry::familiesFor(const std::string& domain,
                                                                       const std::string& opType,
                                                                       DataType dtype) const {
  const std::string& d = normalizedDomain(domain);
  std::vector<const Family*> out;
  std::vector<DataType> keys{dtype};
  if (dtype != DataType::kUndefined) keys.push_back(DataType::kUndefined);
  for (DataType key : keys) {
    for (const Family& f : families_)
      if (f.opType == opType && f.domain == d && f.dtype == key) out.push_back(&f);
  }
  return out;
}

const KernelCandidate* KernelRegistry::pluginCandidate(const std::string& domain,
                                                       const std::string& opType) const {
  if (!fallback_) return nullptr;
  const std::string& d = normalizedDomain(domain);
  const KernelFactory* factory = fallback_(d, opType);
  if (!factory) return nullptr;
  std::lock_guard<std::mutex> lock(pluginMutex_);
  auto [it, added] = pluginCandidates_.try_emplace({d, opType});
  if (added) {
    it->second.id =
        "plugin_" + (d.empty() ? opType : d + "::" + opType);  // the plugin's namespace and name
    it->second.create = [factory](const KernelCreateInfo& info) {
      return Kernel{(*factory)(info), {}, {}};
    };
  }
  return &it->second;
}

KernelSelection KernelRegistry::select(const KernelCreateInfo& info) const {
  return selectFor(info.node.domain, info.node.opType, info);
}

KernelSelection KernelRegistry::selectFor(const std::string& domain, const std::string& opType,
                                          const KernelCreateInfo& info) const {
  KernelSelection s;
  for (const Family* f : familiesFor(domain, opType, kernelDtypeKey(info))) {
    for (const KernelCandidate& c : f->candidates) {
      std::string reason = declineReason(c, info);
      if (reason.empty()) reason = passedOverReason(c, info);
      if (reason.empty()) {
        s.chosen = &c;
        return s;
      }
      s.declined.emplace_back(c.id, std::move(reason));
    }
  }
  if (s.declined.empty()) s.chosen = pluginCandidate(domain, opType);
  return s;
}

KernelAlternatives KernelRegistry::alternatives(const KernelCreateInfo& info) const {
  KernelAlternatives a;
  for (const Family* f : familiesFor(info.node.domain, info.node.opType, kernelDtypeKey(info))) {
    for (const KernelCandidate& c : f->candidates) {
      std::string reason = declineReason(c, info);
      if (!reason.empty()) {
        a.declined.emplace_back(c.id, std::move(reason));
        continue;
      }
      a.supporting.push_back(&c);
      a.generic.push_back(f->dtype == DataType::kUndefined);
    }
  }
  return a;
}

KernelSelection KernelRegistry::selectMostGeneral(const KernelCreateInfo& info) const {
  KernelSelection s;
  for (const Family* f : familiesFor(info.node.domain, info.node.opType, kernelDtypeKey(info))) {
    for (const KernelCandidate& c : f->candidates) {
      std::string reason = declineReason(c, info);
      if (!reason.empty()) {
        s.declined.emplace_back(c.id, std::move(reason));
        continue;
      }
      if (s.chosen)
        s.declined.emplace_back(s.chosen->id,
                                "passed over: reference kernels take the most general candidate");
      s.chosen = &c;
    }
  }
  if (!s.chosen && s.declined.empty())
    s.chosen = pluginCandidate(info.node.domain, info.node.opType);
  return s;
}

const KernelCandidate* KernelRegistry::findById(const KernelCreateInfo& info,
                                                const std::string& id) const {
  for (const Family* f : familiesFor(info.node.domain, info.node.opType, kernelDtypeKey(info)))
    for (const KernelCandidate& c : f->candidates)
      if (c.id == id) return &c;
  const KernelCandidate* plugin = pluginCandidate(info.node.domain, info.node.opType);
  return plugin && plugin->id == id ? plugin : nullptr;
}

Kernel KernelRegistry::create(const KernelCreateInfo& info, const KernelSelection& selection) {
  if (!selection.chosen) {
    std::string message = "no CPU kernel supports this node";
    for (const auto& [id, reason] : selection.declined) message += "; " + id + ": " + reason;
    ir::failNode(info.node, message, ErrorCode::kUnsupportedNode);
  }
  return selection.chosen->create(info);
}

const KernelFactory* KernelRegistry::find(const std::string& domain,
                                          const std::string& opType) const {
  const std::string& d = normalizedDomain(domain);
  for (const Family& f : families_)
    if (f.opType == opType && f.domain == d) return &f.select;
  return fallback_ ? fallback_(d, opType) : nullptr;
}

std::vector<std::string> KernelRegistry::candidateIds() const {
  std::vector<std::string> ids;
  for (const Family& f : families_)
    for (const KernelCandidate& c : f.candidates) ids.push_back(c.id);
  return ids;
}

KernelRegistrar::KernelRegistrar(const char* domain, const char* opType, KernelFactory factory,
                                 KernelMemoryRules rules) {
  KernelRegistry::global().addGeneric(domain, opType, std::move(factory), std::move(rules));
}

KernelRegistrar::KernelRegistrar(const char* domain, const char* opType, KernelFn fn,
                                 KernelMemoryRules rules) {
  KernelRegistry::global().addGeneric(
      domain, opType, [fn = std::move(fn)](const KernelCreateInfo&) { return fn; },
      std::move(rules));
}

}  // namespace kiln::cpu
