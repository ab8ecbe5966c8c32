// The CPU kernel registry (oneDNN's dispatch style): per family (domain, op type, dtype of the
// node's first numeric input) an ordered list of candidates, each with a stable id that spells
// dtype, op, algorithm / tile and ISA (XNNPACK style: f32_nchwc_conv_winograd_f4x4_avx512), the
// ISA it needs, a supports() that returns why it cannot run a node, and optionally a prefers()
// that returns why the heuristics pass it over although it could run it. Without timing (builder
// optimization level 0) the first candidate that supports and is preferred for a node is made
// for it; the builder's tactic selection (build/tactics.h) instead times every candidate that
// supports the node and keeps the fastest. A family's list is its one place of ISA dispatch.
// Families registered for a dtype are tried before the family for any dtype (kUndefined).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernel.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Scratch bytes one run of a kernel needs at these input shapes (nullptr for an omitted or
/// shapeless input) on a pool of `threads` threads.
using WorkspaceFn =
    std::function<uint64_t(const std::vector<const Shape*>& inputShapes, int threads)>;

/// Bytes of a kernel's packed state.
struct KernelBlob {
  const void* data = nullptr;
  uint64_t bytes = 0;
};

/// What a kernel that packs weights keeps, in its own layout, so that a plan can store it and the
/// kernel be made again over those bytes without packing: small parameters, and packed blobs
/// (a plan writes each 64-byte aligned). `owner` keeps the blobs' memory alive: the kernel's
/// own when it saves its state, the plan's bytes (a mapped file) when one is read back; the
/// kernel that restores a state checks every size against its node.
struct KernelState {
  std::vector<uint8_t> params;
  std::vector<KernelBlob> blobs;
  std::shared_ptr<const void> owner;
};

/// Blob k of a saved state as packed floats, checked to hold `floats` of them (kInvalidPlan
/// naming the node otherwise); viewed in place, kept alive by the state's owner.
std::shared_ptr<const float> savedFloats(const ir::Node& node, const KernelState& state, size_t k,
                                         int64_t floats);

/// A kernel made for one node: what runs, what it asks of the memory plan, and its packed state.
struct Kernel {
  KernelFn run;
  WorkspaceFn workspace;              // empty: no scratch memory
  std::function<KernelState()> save;  // empty: nothing packed to keep
};

struct KernelCandidate {
  std::string id;
  CpuIsa isa = CpuIsa::kAvx2;  // the least ISA it runs on; a host below it declines "needs avx512f"
  /// "" when it can run this node, else the reason it declines; empty: supports every node.
  std::function<std::string(const KernelCreateInfo&)> supports;
  /// Asked only when it supports the node: "" when the heuristics pick it, else why they expect
  /// another candidate to be faster (it still runs the node; timed tactics may choose it); empty:
  /// always preferred.
  std::function<std::string(const KernelCreateInfo&)> prefers;
  std::function<Kernel(const KernelCreateInfo&)> create;
  /// Makes the kernel over a state its save() wrote (no packing; throws kInvalidPlan naming the
  /// node when the state does not fit it); empty: the candidate has no state to restore.
  std::function<Kernel(const KernelCreateInfo&, const KernelState&)> restore;
  KernelMemoryRules memory;
};

/// The candidate chosen for a node and the reasons the earlier ones declined.
struct KernelSelection {
  const KernelCandidate* chosen = nullptr;
  std::vector<std::pair<std::string, std::string>> declined;  // (id, reason), in list order
};

/// Every candidate that can run a node (the tactics a builder may time), in list order, and
/// why the others cannot.
struct KernelAlternatives {
  std::vector<const KernelCandidate*> supporting;
  std::vector<bool> generic;  // per supporting candidate: from the any-dtype family
  std::vector<std::pair<std::string, std::string>> declined;  // (id, reason)
};

/// The CPU feature a candidate's ISA needs, as plans and errors name it: "avx2", "avx512f" or the
/// extension's name (cpuIsaName: "avx512vnni", ...).
KILN_INTERNAL_API const char* isaFeatureName(CpuIsa isa);

/// The dtype key of a node: the dtype of its first input that is a number (float or integer),
/// kUndefined when none is known.
DataType kernelDtypeKey(const KernelCreateInfo& info);

class KILN_INTERNAL_API KernelRegistry {
 public:
  static KernelRegistry& global();

  /// Appends a candidate to the family (domain, opType, dtype); kUndefined: any dtype.
  void addCandidate(const std::string& domain, const std::string& opType, DataType dtype,
                    KernelCandidate candidate);
  /// A factory as the single candidate any_<op>_generic (any_ms_<op>_generic for com.microsoft,
  /// any_ms_nchwc_<op>_generic for com.microsoft.nchwc) of (domain, opType) for any dtype.
  void addGeneric(const std::string& domain, const std::string& opType, KernelFactory factory,
                  KernelMemoryRules rules);
  /// The same for a factory that makes the whole Kernel (its workspace, ...).
  void addGenericKernel(const std::string& domain, const std::string& opType,
                        std::function<Kernel(const KernelCreateInfo&)> create,
                        KernelMemoryRules rules = {});

  /// The first candidate that supports the node and that the heuristics prefer (prefers()), with
  /// the reasons of those before it; chosen is null when every candidate declines (or the op has
  /// none).
  KernelSelection select(const KernelCreateInfo& info) const;
  /// Every candidate that supports the node, preferred or not (no plugin candidates).
  KernelAlternatives alternatives(const KernelCreateInfo& info) const;
  /// The last candidate that supports the node (the most general one of its families: a family's
  /// list ends with the kernel that takes every node), for reference runs that compare the
  /// specialised kernels against it; the supporting candidates passed over are listed as declined.
  KernelSelection selectMostGeneral(const KernelCreateInfo& info) const;
  /// The candidate with this id in the node's families, or null.
  const KernelCandidate* findById(const KernelCreateInfo& info, const std::string& id) const;
  /// Makes the chosen candidate's kernel; throws naming the node and every reason when none
  /// applies.
  static Kernel create(const KernelCreateInfo& info, const KernelSelection& selection);

  /// A factory that makes the first supporting candidate's kernel for (domain, opType), or else
  /// the fallback's answer (plugins); null when the op has no kernel.
  const KernelFactory* find(const std::string& domain, const std::string& opType) const;
  /// Asked for an op with no registered kernel (kernels/plugin_kernel.cpp sets it at load time).
  using Fallback =
      std::function<const KernelFactory*(const std::string& domain, const std::string& opType)>;
  void setFallback(Fallback fallback) { fallback_ = std::move(fallback); }

  /// The ids of every candidate, family by family (kiln ops, tests).
  std::vector<std::string> candidateIds() const;

 private:
  struct Family {
    std::string domain, opType;
    DataType dtype = DataType::kUndefined;
    std::deque<KernelCandidate> candidates;  // stable addresses: selections point at them
    KernelFactory select;                    // what find() hands out
  };
  Family& family(const std::string& domain, const std::string& opType, DataType dtype);
  /// select() among the candidates of (domain, opType), whatever op the node is.
  KernelSelection selectFor(const std::string& domain, const std::string& opType,
                            const KernelCreateInfo& info) const;
  /// The families a node's candidates come from, dtype-specific first.
  std::vector<const Family*> familiesFor(const std::string& domain, const std::string& opType,
                                         DataType dtype) const;
  /// The single candidate plugin_<op> wrapping the fallback's factory, made once per op.
  const KernelCandidate* pluginCandidate(const std::string& domain,
                                         const std::string& opType) const;

  std::deque<Family> families_;
  Fallback fallback_;
  mutable std::mutex pluginMutex_;
  mutable std::map<std::pair<std::string, std::string>, KernelCandidate> pluginCandidates_;
};

}  // namespace kiln::cpu
