// What a kernel keeps of its node: kernels read their attributes once, when they are made
// (KernelCreateInfo), into parameters their run function captures, and never look at the graph
// while running. nodeLabel is the node's identity for error messages; bindKernel turns a function
// that reads the parameters and one that runs with them into a kernel factory.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

/// The node's name, op type, domain and opset only (no attributes, inputs or outputs), so that the
/// ir helpers a kernel calls while running (shape rules that fail naming the node) can be given
/// its identity without the graph.
ir::Node nodeLabel(const ir::Node& node);
/// nodeLabel plus the named attributes the node has, for the ir shape rules a kernel shares with
/// inference that read attributes while they check run-time shapes (transposePerm reads "perm",
/// splitSizes "num_outputs"), so that both apply one rule.
ir::Node nodeLabelWithAttrs(const ir::Node& node, std::initializer_list<const char*> names);

/// A factory whose kernel runs run(ctx, params) with params = read(node) (or read(info) when read
/// takes the whole KernelCreateInfo), read once when the kernel is made: a bad attribute fails
/// then, naming the node.
template <typename Read, typename Run>
KernelFactory bindKernel(Read read, Run run) {
  return [read, run](const KernelCreateInfo& info) -> KernelFn {
    if constexpr (std::is_invocable_v<Read, const KernelCreateInfo&>) {
      return [params = read(info), run](KernelContext& ctx) { run(ctx, params); };
    } else {
      return [params = read(info.node), run](KernelContext& ctx) { run(ctx, params); };
    }
  };
}

/// An int attribute when the node has it (an axis whose absence means "flattened").
inline std::optional<int64_t> optionalAttrInt(const ir::Node& node, const std::string& name) {
  if (!ir::hasAttr(node, name)) return std::nullopt;
  return ir::attrInt(node, name);
}

/// The op type, for kernels that serve several ops and name the op in their dtype errors.
inline std::string opTypeOf(const ir::Node& node) { return node.opType; }

}  // namespace kiln::cpu
