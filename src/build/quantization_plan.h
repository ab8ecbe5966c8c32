// Which tensors of a float graph get Q/DQ pairs, with which scales and zero points: computed once
// from kiln's IR and applied both to the IR (implicit quantization at build) and to an ONNX model
// (kiln quantize, src/onnx/qdq_model.h), so the two never disagree (docs/precision.md, "INT8:
// calibration").
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"

namespace kiln::build {

struct QuantizeOptions {
  bool perChannel = true;              // weights: one scale per output channel, else one per tensor
  std::set<std::string> excludeNodes;  // node names that stay float
};

/// A node that gets int8 inputs: its float activation inputs and constant weights.
struct QuantizedNode {
  int node = -1;
  struct Weight {
    int slot = -1;     // input index
    int value = -1;    // the constant's value id
    int64_t axis = 0;  // its output-channel axis
  };
  std::vector<Weight> weights;
};

struct QuantizationTargets {
  std::vector<QuantizedNode> nodes;
  /// Float activations that get a Q/DQ pair (value ids, each once, in graph order): the activation
  /// inputs of the quantized nodes and their outputs (a Relu's output when a Relu alone reads one)
  /// that some node reads.
  std::vector<int> activations;
  /// Why each Conv/MatMul/Gemm that stays float does ("node 'x' (Conv): pinned to fp32").
  std::vector<std::string> skipped;
};

/// The Conv (constant weights), MatMul and Gemm nodes of a sorted graph with inferred types that
/// can be quantized: float32 inputs, not pinned to fp32 (ir/precision.h), not excluded, not
/// already reading a DequantizeLinear.
KILN_INTERNAL_API QuantizationTargets findQuantizationTargets(const ir::Graph& graph,
                                                              const QuantizeOptions& options);

/// A hash of what the activation scales depend on: the quantized nodes (name, op) and the
/// activations (name, shape), as 16 hex digits. A calibration cache stores it.
KILN_INTERNAL_API std::string networkFingerprint(const ir::Graph& graph,
                                                 const QuantizationTargets& targets);

/// The scale and zero point (int8) of one activation, and the range they were chosen for.
struct ActivationQuantization {
  std::string tensor;
  float scale = 1;
  int32_t zeroPoint = 0;
};

/// One inserted pair: QuantizeLinear(tensor) -> DequantizeLinear -> the consumers; for a weight,
/// its int8 values are computed here and only the DequantizeLinear is inserted.
struct QdqPair {
  std::string tensor;                  // the float tensor
  std::string quantized, dequantized;  // the new int8 and float tensors
  std::string scaleName, zeroPointName;
  std::string quantizeNode;  // empty for a weight
  std::string dequantizeNode;
  std::vector<float> scales;       // one, or one per channel along `axis`
  std::vector<int8_t> zeroPoints;  // as many as scales
  int64_t axis = -1;               // -1: per tensor
  Tensor weights;                  // a weight's int8 values; undefined for an activation
  std::vector<std::pair<std::string, int>>
      consumers;  // (node name, input slot) that read `dequantized`
};

struct QuantizationPlan {
  std::vector<QdqPair> pairs;
  std::vector<std::string> nodes;  // the quantized nodes' names
};

/// The pairs for `targets`: activations with the given parameters (one entry per target
/// activation, same order), weights quantized symmetrically to [-127, 127].
KILN_INTERNAL_API QuantizationPlan makeQuantizationPlan(
    const ir::Graph& graph, const QuantizationTargets& targets,
    const std::vector<ActivationQuantization>& activations, const QuantizeOptions& options);

/// Inserts the plan's nodes into kiln's IR, then sorts the graph and infers its types again.
KILN_INTERNAL_API void applyQuantizationPlan(const QuantizationPlan& plan, ir::Graph& graph);

}  // namespace kiln::build
