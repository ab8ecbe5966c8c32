// Graph optimization passes. Each takes a sorted, verified graph and keeps it so.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::opt {

/// Evaluates every deterministic node whose inputs are all constants (not overridable graph
/// inputs), and every Shape/Size node whose input shape is static, replacing their outputs by
/// constants; re-infers shapes after each round. Returns the number of nodes folded.
/// DequantizeLinear is left to fuseLayers unless `foldDequantize`: the QDQ fusions keep a
/// weight int8, and fuseLayers folds the DQs of constants they leave.
KILN_INTERNAL_API int foldConstants(ir::Graph& graph, bool foldDequantize = false);

/// Runs one node's CPU kernel on these inputs (null: omitted) of these types, as constant folding
/// does; fails naming the node when kiln has no schema or kernel for it.
std::vector<Tensor> evaluateNode(const ir::Node& node, const std::vector<const Tensor*>& inputs,
                                 const std::vector<const ir::TypeInfo*>& types);

/// Runs the float16 interior of the graph in float32 (kiln has no float16 arithmetic kernels):
/// float16 outputs of the nodes computesWideInFloat32 (float16_rules.h) accepts and the float16
/// constants only they read become float32, a Cast is inserted where a float16 graph input or a
/// float16 result of another node enters them and where their result leaves for a graph output
/// or another node, and every Cast that is then an identity (the model's float16<->float32
/// pairs) is removed. Graph inputs and outputs keep their declared types. Re-infers shapes;
/// returns the number of Casts removed (see docs/precision.md, "FP16 models").
KILN_INTERNAL_API int widenFloat16Interior(ir::Graph& graph);

/// Removes nodes whose outputs nobody reads (not graph outputs). Returns the number removed.
KILN_INTERNAL_API int eliminateDeadNodes(ir::Graph& graph);

// The fusion passes below return the number of nodes they removed. A node that absorbs others
// lists the original node names in its "kiln_fused_from" attribute (see rewrite_util.h).

/// Merges nodes that compute the same op on the same inputs with the same attributes.
int eliminateCommonSubexpressions(ir::Graph& graph);

/// Composes consecutive Transposes, bypasses identity ones, collapses Reshape chains.
int cancelTransposesAndReshapes(ir::Graph& graph);

/// Folds an inference-mode BatchNormalization into the Conv with constant weights before it.
int foldBatchNormIntoConv(ir::Graph& graph);

/// Drops the outer kernel rows and columns of a Conv with constant weights and a static input
/// that only ever read padding (DeepLabV3's widely dilated 3x3 convs become 1x1); returns how
/// many Convs it trimmed.
int trimDeadConvTaps(ir::Graph& graph);

/// Replaces the ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add LayerNorm pattern by
/// LayerNormalization.
int fuseLayerNormPattern(ir::Graph& graph);

/// Transpose/MatMul/[scale]/[mask Add]/Softmax/MatMul/Transpose self-attention ->
/// kiln::FusedAttention.
int fuseAttention(ir::Graph& graph);

/// MatMul(A, constant B) + bias [+ residual] [+ activation] -> kiln::FusedMatMul (float32).
int fuseMatMulEpilogues(ir::Graph& graph);

/// The Q, K and V projections (FusedMatMuls on one input) of a kiln::FusedAttention -> one
/// FusedMatMul with the weights side by side, read by the attention in its packed form.
int packAttentionProjections(ir::Graph& graph);

/// Attribute on a Conv, MatMul or Gemm of a QDQ model that stays float32: why it does not run INT8.
inline constexpr const char* kInt8RefusalAttr = "kiln_int8_refused";
/// Attribute on a kiln::QConv / kiln::QGemm with float32 output: why its output is not quantized.
inline constexpr const char* kInt8FloatOutputAttr = "kiln_int8_float_output";

/// DQ(x) + DQ(constant w) [+ bias] -> Conv / MatMul / Gemm [-> activation] [-> Q] -> kiln::QConv /
/// kiln::QGemm (see fuse_qdq.cpp); the others record why in kInt8RefusalAttr. Runs before the
/// float fusions, which would otherwise take the float ops first.
int fuseQdqLayers(ir::Graph& graph);

/// DQ -> MaxPool / Reshape / Transpose / Flatten / Squeeze / Unsqueeze / Slice / Concat / nearest
/// Resize -> Q with equal parameters -> the op on the int8 tensor (see fuse_qdq_int8_moves.cpp).
int runInt8DataMovement(ir::Graph& graph);

/// DQ(a) [+ DQ(b)] -> Add / Mul / GlobalAveragePool -> Q with per-tensor constant parameters ->
/// kiln::QLinearAdd / QLinearMul / QLinearGlobalAveragePool (see fuse_qdq_elementwise.cpp).
int fuseQdqElementwise(ir::Graph& graph);

/// DQ -> elementwise ops of one tensor (activations, arithmetic with constant scalars) -> Q with
/// per-tensor constant parameters -> kiln::QLinearLookup, a table of the 256 values (see
/// fuse_qdq_lookup.cpp). Runs after the weight DQs are folded.
int fuseQdqLookups(ir::Graph& graph);

/// Conv [+ residual Add] [+ activation] -> kiln::FusedConv (float32).
KILN_INTERNAL_API int fuseConvEpilogues(ir::Graph& graph);

/// Runs float32 2-D convolutions in the blocked NCHWc layout (kiln::NchwcConv, see ir/ops/nchwc.h)
/// and keeps their outputs blocked through the per-element ops, pools and channel Concats between
/// them, reordering only where a plain NCHW tensor enters or leaves (see nchwc_layout.cpp).
/// Returns the number of nodes converted to the blocked layout.
KILN_INTERNAL_API int convertToNchwcLayout(ir::Graph& graph);

/// kiln::QConv nodes the direct NHWC kernel takes -> channels_last = 1, their outputs kept
/// channels-last through kiln::QLinearAdd / QLinearMul and into kiln::QLinearGlobalAveragePool,
/// with a Transpose where a channels-first tensor enters or leaves (see nhwc_int8_layout.cpp).
/// Returns the number of nodes converted.
KILN_INTERNAL_API int convertToNhwcInt8Layout(ir::Graph& graph);

/// Mul(X, S) read only by a 1x1 kiln::NchwcConv, S a blocked per-channel scale [N or 1, Cb, 1, 1,
/// 16] and 8 * Co <= H * W (a squeeze-excitation gate before its projection) -> the NchwcConv's X
/// scale input (see ir/ops/nchwc.h and fold_se_scale.cpp). Returns the number of Muls removed.
int foldChannelScaleIntoNchwcConv(ir::Graph& graph);

/// Switches for fuseLayers.
struct FusionOptions {
  /// Convert to the blocked NCHWc layout (convertToNchwcLayout) and the 8-bit convolutions to
  /// channels-last (convertToNhwcInt8Layout).
  bool nchwcLayout = true;
};

/// Every pass above after constant folding and dead-node removal, in an order where each
/// pattern sees its predecessors' results (BatchNorm folds before Conv fusion looks for
/// activations). Returns the number of nodes removed by fusion.
KILN_INTERNAL_API int fuseLayers(ir::Graph& graph, const FusionOptions& options = {});

/// The network node names a layer was made from (itself first), empty if it absorbed none.
KILN_INTERNAL_API std::vector<std::string> fusedFrom(const ir::Node& node);

/// For each network node absorbed into another layer, that layer's name.
std::map<std::string, std::string> fusedNodeNames(const ir::Graph& graph);

}  // namespace kiln::opt
