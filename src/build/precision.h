// Precision assignment: which layers of the optimized graph compute in BF16 (BuilderFlag::kBF16)
// or keep their weights in FP16 (BuilderFlag::kFP16), with per-layer constraints, recorded on each
// node as ir::kPrecisionAttr for kernel selection, then settled against the kernels chosen (a
// layer no kernel of its precision took is marked fp32 again).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "build/network_impl.h"
#include "core/internal_api.h"
#include "engine/executor.h"
#include "engine/plan_format.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/logger.h"

namespace kiln::build {

enum class PrecisionConstraints { kNone, kObey, kPrefer };

/// What the builder (or a Session) was asked for.
struct PrecisionRequest {
  bool bf16 = false;  // autocast eligible layers to BF16
  bool fp16 = false;  // FP16 weights for eligible layers that BF16 did not take
  PrecisionConstraints constraints = PrecisionConstraints::kNone;
  /// Network node name -> the precision its layer asked for (setPrecision, --layer-precisions).
  std::map<std::string, DataType> layers;
};

/// The request of a build: its flags and, under kOBEY/kPREFER_PRECISION_CONSTRAINTS, the
/// setPrecision of the network layers (over `graph`'s nodes; without either flag they are ignored,
/// with a warning, as TensorRT does). Throws kInvalidArgument for a precision no flag allows.
PrecisionRequest precisionRequest(const std::vector<LayerRecord>& layers, const ir::Graph& graph,
                                  const BuilderConfig& config, ILogger& logger);

/// The precision the request pins the node to (through any network node fused into it), or
/// kUndefined; the name of the network layer that asked goes to `who`.
DataType pinnedPrecision(const ir::Node& node, const PrecisionRequest& request, std::string* who);

/// Marks every layer that may compute in BF16: eligible op types (Conv, ConvTranspose, MatMul,
/// Gemm, kiln::FusedMatMul, kiln::FusedConv, kiln::NchwcConv) unless constrained to fp32, or
/// feeding the network's final Softmax (through shape-only ops); layers asked for bf16 too. On a
/// CPU without AVX512_BF16 marks none and warns (a constraint to bf16 under kObey is an error).
/// Under kFP16 then marks fp16 the Linear layers (MatMul, Gemm, kiln::FusedMatMul) not marked yet,
/// by the same rules: their weights are kept in half precision (f16w_candidates.h).
/// Returns one line per decision (for the build report).
std::vector<std::string> markPrecisions(ir::Graph& graph, const PrecisionRequest& request,
                                        ILogger& logger);

/// Marks the nodes of layers constrained to fp32 with kPrecisionAttr = "fp32" before implicit
/// INT8 quantization, which leaves such nodes float (markPrecisions runs after the fusions).
void pinFloatLayers(ir::Graph& graph, const PrecisionRequest& request);

/// Times each layer marked bf16 that a BF16 kernel takes against the FP32 kernel it would get
/// otherwise (random inputs at the profile's opt shapes, `threads` threads) and marks it fp32
/// where BF16 is not at least 5 % faster; layers constrained to bf16 are not timed
/// (precision_timing.cpp).
std::vector<std::string> timePrecisions(ir::Graph& graph, const plan::Profile& profile, int threads,
                                        const PrecisionRequest& request, ILogger& logger);

/// After kernel selection: a layer marked bf16 (fp16) that no BF16 (FP16-weight) kernel took is
/// marked fp32 (logged with the kernels' reasons; an error under kObey when the layer itself asked
/// for that precision).
std::vector<std::string> settlePrecisions(ir::Graph& graph,
                                          const std::vector<KernelChoice>& choices,
                                          const PrecisionRequest& request, ILogger& logger);

/// Parses trtexec's --layerPrecisions syntax, "name:fp32,other:bf16" (types fp32, bf16, fp16,
/// int8; a name may hold ':'; the last one separates); throws kInvalidArgument naming the bad
/// entry.
KILN_INTERNAL_API std::map<std::string, DataType> parseLayerPrecisions(const std::string& text);

}  // namespace kiln::build
