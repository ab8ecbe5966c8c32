// Reading and writing ONNX model files as protobuf messages (kiln quantize and kiln extract write
// models; the loader converts them to kiln's IR instead).
#pragma once
#include <onnx/onnx_pb.h>

#include <string>

namespace kiln::onnx_import {

/// Parses the file; throws kiln::Error naming it when it cannot be read or is not a model.
onnx::ModelProto readModelProto(const std::string& path);
/// Writes the model; throws kiln::Error naming the file on failure.
void writeModelProto(const onnx::ModelProto& model, const std::string& path);

}  // namespace kiln::onnx_import
