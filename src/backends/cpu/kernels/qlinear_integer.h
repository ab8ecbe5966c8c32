// The integer stage of QLinearMatMul and QLinearConv: they multiply exactly as MatMulInteger and
// ConvInteger do (operands minus zero points, int32 sums) and only then requantize, so they run
// those ops' CPU kernels instead of repeating them.
#pragma once
#include <vector>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

class IntegerStage {
 public:
  /// Makes the kernel of `integerOp` for a node whose inputs `picks` are that op's inputs, in order
  /// (a pick past the node's inputs: omitted). `standInTypes[k]`, where given, is the type of the
  /// operand that run() will be handed in place of pick k (an operand the op quantizes itself).
  IntegerStage(const KernelCreateInfo& info, const char* integerOp, std::vector<size_t> picks,
               const std::vector<const ir::TypeInfo*>& standInTypes = {});
  /// Runs it on ctx's inputs; returns the int32 result of shape `shape`.
  Tensor run(const KernelContext& ctx, const Shape& shape) const;
  /// run() with `standIn` in place of the integer op's input `pick` (an operand prepared at build).
  Tensor run(const KernelContext& ctx, const Shape& shape, size_t pick,
             const Tensor& standIn) const;
  /// run() with `standIns[k]`, where not null, in place of the integer op's input k.
  Tensor run(const KernelContext& ctx, const Shape& shape,
             const std::vector<const Tensor*>& standIns) const;

 private:
  KernelFn kernel_;
  std::vector<size_t> picks_;
};

/// Values of a scale or zero-point input that holds one value, or `count` values in a 1-D tensor;
/// fails naming the node and the input (by its ONNX name) otherwise.
std::vector<double> qlinearParams(const KernelContext& ctx, size_t input, const char* name,
                                  int64_t count);

}  // namespace kiln::cpu
