// Fuzz target: an ONNX model file as raw bytes, through the loader (protobuf parse, external data,
// Constant nodes, topological sort, verification) and shape inference, as `kiln inspect` runs them.
#include "onnx_model_checks.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::loadImportAndInfer(data, size);
  return 0;
}
