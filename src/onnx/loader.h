// Reads ONNX model files (protobuf) into kiln's IR.
#pragma once
#include <string>

#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/logger.h"
#include "kiln/model_metadata.h"

namespace kiln::onnx_import {

/// The name kiln gives a model's node: its own, or "<op_type>_<index in the graph>" when it has
/// none.
std::string importedNodeName(const std::string& name, const std::string& opType, int index);

/// Loads, sorts and verifies a model. Errors name the file and the node or tensor at fault.
/// `metadata`, when given, receives the model's descriptive fields; `warnings`, when given, what
/// is odd but harmless (initializers no node uses, which kiln ignores, as onnxruntime does).
KILN_INTERNAL_API ir::Model loadModel(const std::string& path, ModelMetadata* metadata = nullptr,
                                      ILogger* warnings = nullptr);
/// Same, from bytes in memory; external data is resolved against baseDir.
KILN_INTERNAL_API ir::Model loadModelFromBytes(const void* data, size_t size,
                                               const std::string& baseDir,
                                               const std::string& displayName,
                                               ModelMetadata* metadata = nullptr,
                                               ILogger* warnings = nullptr);

}  // namespace kiln::onnx_import
