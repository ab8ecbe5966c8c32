// A node checked against ONNX's operator rules for its opset (src/ir/onnx_type_table.h):
// the operator exists and is not deprecated there, its input and output counts, and its
// attributes' names, types and required ones.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "onnx/model_check.h"

namespace kiln::onnx_import {

/// Appends the node's problems; `label` names it ("node 'conv1' (Conv)"). Nodes of domains other
/// than ai.onnx and ai.onnx.ml (plugins, vendor ops) are not checked here.
void checkNodeSchema(const onnx::NodeProto& node, const std::string& label, int64_t opset,
                     std::vector<ModelProblem>& problems);

}  // namespace kiln::onnx_import
