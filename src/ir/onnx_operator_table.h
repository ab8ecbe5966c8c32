// ONNX's operator rules beyond types, for every operator version, as the onnx package declares
// them: input and output counts and attributes (generated into onnx_operator_table.cpp by
// scripts/gen_onnx_type_table.py). `kiln check` validates nodes against them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::ir {

struct OnnxOperatorRow {
  const char* domain;  // "" = ai.onnx
  const char* opType;
  int sinceVersion;
  int minInputs, maxInputs;    // a variadic parameter makes the maximum 2147483647
  int minOutputs, maxOutputs;
  const char* attributes;  // "alpha:float axis:int!": name and ONNX attribute type, '!' when required
  bool deprecated;         // ONNX removed the operator at this version
};

extern const OnnxOperatorRow kOnnxOperatorRows[];
extern const size_t kOnnxOperatorRowCount;
/// The newest ai.onnx opset, IR version and element type (TensorProto.DataType) the onnx package
/// that made the table knows.
extern const int64_t kOnnxLatestOpset;
extern const int64_t kOnnxLatestIrVersion;
extern const int kOnnxLatestDataType;

}  // namespace kiln::ir
