// Reads ONNX model files (protobuf) into kiln's IR.
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln::onnx_import {

/// Loads, sorts and verifies a model. Errors name the file and the node or tensor at fault.
ir::Model loadModel(const std::string& path);
/// Same, from bytes in memory; external data is resolved against baseDir.
ir::Model loadModelFromBytes(const void* data, size_t size, const std::string& baseDir,
                             const std::string& displayName);

}  // namespace kiln::onnx_import
