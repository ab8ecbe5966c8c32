// TensorProto -> Tensor, including every typed storage field and external data.
#pragma once
#include <string>

#include <onnx/onnx_pb.h>

#include "kiln/tensor.h"

namespace kiln::onnx_import {

/// Converts a tensor. `baseDir` is the model's folder, against which external data is resolved
/// (external files must stay inside it); `where` names the tensor in error messages.
Tensor tensorFromProto(const onnx::TensorProto& proto, const std::string& baseDir, const std::string& where);

}  // namespace kiln::onnx_import
