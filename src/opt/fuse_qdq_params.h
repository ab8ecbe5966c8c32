// The quantization parameters of a QDQ model's DequantizeLinear and QuantizeLinear nodes, as the
// QDQ fusions (fuse_qdq.cpp, fuse_qdq_int8_moves.cpp) read them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::opt {

/// A DequantizeLinear (its input is `quantized`) or a QuantizeLinear (its output is `quantized`).
struct QuantParams {
  int node = -1;
  int quantized = ir::kNoValue;
  int scale = ir::kNoValue;
  int zeroPoint = ir::kNoValue;  // kNoValue: zero of the quantized type
  DataType type = DataType::kUndefined;
  int64_t axis = 1;
  const Tensor* scaleValue = nullptr;      // when the scale is a constant
  const Tensor* zeroPointValue = nullptr;  // when the zero point is a constant
};

/// The DequantizeLinear node that produces `value` (quantized input int8 or uint8, unblocked), if
/// any.
std::optional<QuantParams> dequantizerOf(const ir::Graph& graph, int value);

/// The node at `index` as a QuantizeLinear to int8 or uint8 (unblocked), if it is one.
std::optional<QuantParams> asQuantizer(const ir::Graph& graph, int index);

/// The QuantizeLinear with per-tensor constant parameters that alone reads `value` (not a graph
/// output, not yet removed), if there is one.
std::optional<QuantParams> soleQuantizerOf(const ir::Graph& graph,
                                           const std::vector<std::vector<int>>& consumers,
                                           const std::vector<bool>& removed, int value);

/// "" when scale and zero point are constants of one value (the scale float32), else why not,
/// starting with `what` ("x scale is not a scalar").
std::string perTensorProblem(const QuantParams& p, const std::string& what);

/// Whether both quantize to the same type with the same per-tensor scale and zero point.
bool sameParams(const QuantParams& a, const QuantParams& b);

/// The single scale value (per-tensor parameters).
double scaleOf(const QuantParams& p);
/// The zero point of element k (0 when absent; per-tensor: k ignored).
double zeroPointOf(const QuantParams& p, int64_t k);

/// The zero point value id, adding a constant zero of the quantized type when it is absent.
int zeroPointInput(ir::Graph& graph, const QuantParams& p);

}  // namespace kiln::opt
