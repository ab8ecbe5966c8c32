// ONNX's type constraints for every operator version, as the onnx package declares them
// (generated into onnx_type_table.cpp by scripts/gen_onnx_type_table.py).
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::ir {

struct OnnxTypeRow {
  const char* domain;       // "" = ai.onnx
  const char* opType;
  int sinceVersion;
  const char* inputs;       // type variable per input, space-separated; a variadic last one ends in '*'
  const char* outputs;      // likewise for outputs
  const char* constraints;  // "T: float16 float double; T1: int64" (ONNX's element type names)
};

extern const OnnxTypeRow kOnnxTypeRows[];
extern const size_t kOnnxTypeRowCount;

}  // namespace kiln::ir
