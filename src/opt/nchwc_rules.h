// The decisions of the NCHWc layout pass (nchwc_layout.cpp): which convolutions run blocked, which
// ops run unchanged on blocked tensors, and how a binary op's plain operand joins a blocked one.
// Kept apart from the rewrite so they can be tuned after measuring.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::opt {

/// Convolutions need at least this many output channels (depthwise: channels) to run blocked;
/// below it most of each 16-channel vector would be padding.
inline constexpr int64_t kMinNchwcConvChannels = 16;

/// A group-1 convolution whose X is not blocked already reads it plain (an RGB image) below this
/// many input channels, and reorders it from this many on.
inline constexpr int64_t kMinBlockedInputChannels = 8;

/// ReduceMean / ReduceMax take their axes as an input from this opset on.
inline constexpr int64_t kReduceAxesInputOpset = 18;

/// The channel count of a float32 NCHW value whose channel dim is known.
std::optional<int64_t> nchwChannels(const ir::Graph& graph, int valueId);

/// Whether a Conv / kiln::FusedConv becomes a kiln::NchwcConv: float32, 2-D, constant W, and
/// group 1 with >= 16 output channels, depthwise (group == Ci == Co) with >= 16 channels, or
/// grouped with >= 16 output channels in groups that split into whole blocks (8 or a multiple of
/// 16 channels per group, ir/ops/nchwc_groups.h); other grouped convolutions stay FusedConvs.
/// 3x3 stride-1 convolutions run blocked too: NchwcConv picks Winograd for them where it pays
/// (backends/cpu/kernels/nchwc_winograd.h), faster than the plain Winograd with its two reorders.
KILN_INTERNAL_API bool wantsNchwc(const ir::Graph& graph, const ir::Node& node);

/// Per-element ops of one tensor input (other inputs, like Clip's bounds, are scalars).
bool isBlockedUnaryOp(const std::string& opType);
/// Per-element ops whose inputs broadcast (Add, Mul, ..., PRelu).
bool isBlockedBinaryOp(const std::string& opType);

/// How an operand of a binary op with a blocked output of `channels` channels is fed.
enum class OperandForm {
  kBlocked,      // it has a blocked form with those channels
  kOneElement,   // broadcasts as it is
  kConstant,     // a constant, re-laid out once (blockConstant)
  kReorder,      // a plain NCHW tensor with those channels: a ReorderToNchwc
  kUnsupported,  // the op stays plain
};

/// The form of an operand that has no blocked form of its own.
OperandForm plainOperandForm(const ir::Graph& graph, int valueId, int64_t channels);

/// A float32 constant of rank <= 4 broadcast against NCHW (dims right-aligned to [a, c, h, w]),
/// laid out to broadcast the same way against blocked tensors: [a, ceil(c/16), h, w, 16] with
/// zero padding, or [a, 1, h, w, 1] when c == 1.
KILN_INTERNAL_API Tensor blockConstant(const Tensor& constant);

/// Whether a ReduceMean / ReduceMax reduces exactly axes 2 and 3 of a 4-D input, keeping dims.
bool reducesSpatialKeepingDims(const ir::Graph& graph, const ir::Node& node);

}  // namespace kiln::opt
