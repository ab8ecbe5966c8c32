// A MatMul whose weights come in a quantized form (com.microsoft MatMulNBits, MatMulBnb4,
// MatMulFpQ4): the weights dequantized to a float32 [K, N] matrix, once when the kernel is made
// where they are constants (the originals are then freed), else on each run, and multiplied by the
// MatMul kernel (whose packed-weight candidate packs that matrix), plus an optional bias.
#pragma once
#include <functional>
#include <vector>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

struct DequantizedMatMul {
  /// The inputs `dequantize` reads, in the order it gets them (nullptr for an omitted one).
  std::vector<size_t> weightInputs;
  int64_t K = 0, N = 0;
  /// W [K, N] float32 of those inputs; fails naming `label` on bad sizes.
  std::function<Tensor(const ir::Node& label, const std::vector<const Tensor*>& weights)>
      dequantize;
  /// An input of N float32 values added to each row of the product; none by default.
  size_t biasInput = kNoBias;
  static constexpr size_t kNoBias = static_cast<size_t>(-1);
};

KernelFn makeDequantizedMatMul(const KernelCreateInfo& info, DequantizedMatMul spec);

}  // namespace kiln::cpu
