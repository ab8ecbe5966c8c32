// Shape rules of the data-movement ops that both inference and the CPU kernels need
// (kernels that alias their input, such as Reshape, compute the output shape themselves).
#pragma once
#include <optional>
#include <vector>

#include "ir/shape_helpers.h"

namespace kiln::ir {

/// Reshape's output: 0 copies the input dim (unless allowZero), -1 takes the remaining elements.
/// Symbolic dims are carried through where the element counts cancel.
SymShape reshapeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& target,
                         bool allowZero);
/// Removes the given axes (which must be 1), or every known 1 when axes is empty.
SymShape squeezeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& axes);
/// Inserts 1s at the given axes of the output.
SymShape unsqueezeSymShape(const Node& node, const SymShape& in, const std::vector<int64_t>& axes);
/// The product of dims [begin, end): known, a single symbol, or unknown.
Dim productDim(const SymShape& shape, size_t begin, size_t end);

/// The axes of Squeeze/Unsqueeze: the "axes" attribute before opset 13, input 1 from 13.
/// nullopt when the input's value is not known yet.
std::optional<std::vector<int64_t>> axesFromAttrOrInput(const Node& node, const Tensor* axesInput,
                                                        bool hasAxesInput);

/// One axis of a Slice after clamping: elements start, start + step, ... (count of them).
struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

/// Normalizes one (start, end, step) triple against a dim of size `dim`, as ONNX Slice does.
SliceAxis clampSlice(int64_t start, int64_t end, int64_t step, int64_t dim);

/// Slice parameters (starts, ends, axes, steps), from attributes (opset < 10) or inputs.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};
/// Reads and validates Slice parameters; `inputs[i]` is the value of input i when known.
/// Returns nullopt if a needed input value is unknown. Axes are normalized against `rank`.
std::optional<SliceParams> sliceParams(const Node& node, const std::vector<const Tensor*>& inputs,
                                       const std::vector<bool>& present, int64_t rank);

/// Transpose's permutation: the "perm" attribute (validated) or the reversed axes.
std::vector<int64_t> transposePerm(const Node& node, size_t rank);

/// The sizes of Split's outputs along a dim of size `dim` (which may be unknown, -1, when the
/// sizes come from `split`): explicit `split` sizes, num_outputs chunks (opset 18), or equal parts.
/// Returns nullopt if the sizes depend on an unknown dim.
std::optional<std::vector<int64_t>> splitSizes(const Node& node, int64_t dim, size_t numOutputs,
                                               const std::optional<std::vector<int64_t>>& split);

/// Pad's amounts as [begin_0.., end_0..] over all `rank` axes, from pads and optional axes values.
std::vector<int64_t> padAmounts(const Node& node, size_t rank, const std::vector<int64_t>& pads,
                                const std::optional<std::vector<int64_t>>& axes);

}  // namespace kiln::ir
