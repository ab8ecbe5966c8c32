// TensorProto -> Tensor, including every typed storage field and external data, and back.
#pragma once
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::onnx_import {

/// Converts a tensor. `baseDir` is the model's folder, against which external data is resolved
/// (external files must stay inside it); `where` names the tensor in error messages.
/// `rawData`, when given, is the tensor's raw_data already moved out of the proto: the tensor
/// views it instead of copying it (so a model's weights are not held twice while it loads).
KILN_INTERNAL_API Tensor tensorFromProto(const onnx::TensorProto& proto, const std::string& baseDir,
                                         const std::string& where,
                                         std::shared_ptr<std::string> rawData = nullptr);

/// The reverse: a tensor as a TensorProto with its values in raw_data (string_data for strings;
/// 4-bit and 2-bit types packed as ONNX stores them). Sequences and optionals are not tensors.
KILN_INTERNAL_API void tensorToProto(const Tensor& tensor, const std::string& name,
                                     onnx::TensorProto& proto);

}  // namespace kiln::onnx_import
