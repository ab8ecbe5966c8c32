// kiln extract: the smallest sub-model computing some tensors of a model from others, as
// onnx.utils.extract_model does. The header has no protobuf types, so the CLI can use it.
#pragma once
#include <string>
#include <vector>
#include "core/internal_api.h"

namespace kiln::onnx_import {

/// Writes to `outputPath` the nodes of `modelPath` needed to compute `outputs` from `inputs`, with
/// the initializers they read, the model's opsets, and the types and shapes of the new inputs and
/// outputs (declared ones, else as kiln infers them). Nodes with subgraphs keep the outer-scope
/// tensors their bodies read. External data the sub-model needs is written to `outputPath`.data
/// beside it. Throws kiln::Error naming the tensor when an output cannot be computed from the
/// inputs (it needs another graph input) or a name is not a tensor of the model.
KILN_INTERNAL_API void extractModel(const std::string& modelPath,
                                    const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs,
                                    const std::string& outputPath);

}  // namespace kiln::onnx_import
