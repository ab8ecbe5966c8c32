// What the integer-GEMM kernels of the quantized ops share (qgemm_ops.h): checks of a node's
// inputs at build time, the zero points, scales and output bounds of a call, and the constant
// weights packed or restored from a plan.
#pragma once
#include <cstdint>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/qgemm_ops.h"
#include "backends/cpu/qgemm/qgemm.h"

namespace kiln::cpu {

/// Input i's constant value, or null.
const Tensor* constantInput(const KernelCreateInfo& info, int i);
/// Input i's type when known, or null.
const ir::TypeInfo* inputType(const KernelCreateInfo& info, int i);

/// "" when the node's inputs fit the integer kernels: u8/s8 activations, constant u8/s8 weights
/// of rank `weightRank` (0: any), float32 scales, one value for a_scale, y_scale and
/// y_zero_point, and an activation the output bounds can express; else why not.
std::string qproductDeclines(const KernelCreateInfo& info, const QProductSignature& s,
                             int64_t weightRank);

/// The i-th value of a u8 / s8 / int32 zero point (one value, or one per index).
int32_t zeroPointAt(const Tensor& zp, int64_t i);

/// Copies a zero point (absent: 0) into out (1 or count values) shifted by `shift`; returns the
/// number of values (1 or count), failing naming the input when it has another length.
int64_t loadZeroPoints(const KernelContext& ctx, int input, const char* name, int64_t count,
                       int32_t shift, int32_t* out);

/// A float32 scale input's values, checked to be one or `count` values; fails naming the input.
const float* scaleValues(const KernelContext& ctx, int input, const char* name, int64_t count,
                         int64_t& n);

/// What a call's int32 result becomes, for an output of `dtype` with `channels` output channels:
/// int32 without scales; else the multipliers (aScale * bScale[c] * alpha, / yScale when the
/// output is quantized; written to `multipliers`, one or `channels` of them), the output zero
/// point and the bounds of s.act. aName / bName: the scales' ONNX names for errors.
QGemmOutput productOutput(const KernelContext& ctx, const QProductSignature& s, DataType dtype,
                          int64_t channels, const char* aName, const char* bName,
                          float* multipliers);

/// The int32 bias input (one value per output channel), or null when the op has none.
const int32_t* productBias(const KernelContext& ctx, const QProductSignature& s, int64_t channels);

/// The blob of a packed matrix for KernelState, and the k-th matrix a plan's state holds (blob k,
/// parameter bytes k: the matrices' params() one after another); kInvalidPlan naming the node
/// when its size or parameters do not fit the node.
KernelBlob blobOf(const PackedQMatrix& m);
PackedQMatrix savedQWeights(const ir::Node& node, const KernelState& state, size_t k, QSide side,
                            CpuIsa isa, int64_t outer, int64_t depth);

/// "prefix_isa" for the kernel ids.
std::string qkernelId(const std::string& prefix, CpuIsa isa);
/// "u8s8" or "s8s8": how the ids of a family keyed by the activations' type begin (the weights may
/// be u8 or s8 in both).
std::string qactivationsPrefix(DataType activations);

/// MatMulInteger's and ConvInteger's inputs: A / X, B / W, their zero points; int32 out.
QProductSignature integerProductSignature(const ir::Node&);

}  // namespace kiln::cpu
