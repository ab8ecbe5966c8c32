#include "onnx/model_file.h"

#include <fstream>

#include "kiln/error.h"

namespace kiln::onnx_import {

onnx::ModelProto readModelProto(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIoError, path + ": cannot open the model file");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in) || !model.has_graph()) {
    throw Error(ErrorCode::kInvalidModel,
                path + ": not a valid ONNX model (the protobuf could not be parsed)");
  }
  return model;
}

void writeModelProto(const onnx::ModelProto& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !model.SerializeToOstream(&out))
    throw Error(ErrorCode::kIoError, path + ": cannot write the model");
}

}  // namespace kiln::onnx_import
