// kiln check's ONNX half: a model file validated as onnx.checker's full check does (model header,
// opsets, names, topological order, dangling inputs, operator schemas, attributes, value types,
// initializer data and external data), every problem collected instead of stopping at the first.
// The header has no protobuf types, so the CLI can use it.
#pragma once
#include <string>
#include <vector>
#include "core/internal_api.h"

namespace kiln::onnx_import {

/// One problem: the rule it breaks ("topological-order") and what is wrong, naming the node and
/// the tensor ("node 'add' (Add) input 1 'b' is produced by a later node 'mul' (Mul)").
struct ModelProblem {
  std::string rule;
  std::string message;
};

/// Every problem of the model file (empty: valid). Throws kiln::Error only when the file cannot
/// be read or parsed at all.
KILN_INTERNAL_API std::vector<ModelProblem> checkModelFile(const std::string& path);

}  // namespace kiln::onnx_import
