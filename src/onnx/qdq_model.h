// A quantization plan (build/quantization_plan.h) applied to an ONNX model: the QDQ model that
// kiln quantize writes, which ONNX Runtime runs as well as kiln.
#pragma once
#include <string>

#include "build/quantization_plan.h"
#include "core/internal_api.h"

namespace onnx {
class ModelProto;  // onnx/onnx_pb.h: not included, so that the CLI needs no protobuf headers
}

namespace kiln::onnx_import {

/// Adds the plan's QuantizeLinear/DequantizeLinear nodes and their initializers (int8 weights,
/// scales, zero points) to the model's graph, in topological order, and points the consumers at
/// the dequantized tensors. Needs ai.onnx opset >= 10, and >= 13 for per-channel weights.
KILN_INTERNAL_API void applyQuantizationPlan(const build::QuantizationPlan& plan,
                                             onnx::ModelProto& model);

/// Reads the model file, applies the plan and writes the result to `outputPath` (throws naming the
/// file).
KILN_INTERNAL_API void writeQdqModel(const std::string& modelPath,
                                     const build::QuantizationPlan& plan,
                                     const std::string& outputPath);

}  // namespace kiln::onnx_import
