// The checks the two ONNX fuzz targets (raw bytes, and ModelProto-aware mutation) run on a model:
// what `kiln inspect MODEL` does, loading, importing and inferring shapes. Defines the targets'
// libFuzzer entry points: include it in one file of each.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/executor.h"
#include "fuzz_support.h"
#include "ir/op_schema.h"
#include "ir/shape_inference_report.h"
#include "onnx/loader.h"

namespace kiln::fuzz {

/// External data is resolved against a folder that does not exist, so no file is ever read.
inline constexpr const char* kNoExternalDataDir = "/nonexistent-kiln-fuzz-dir";

inline void loadImportAndInfer(const uint8_t* data, size_t size) {
  refusedOnlyByKilnErrors([&] {
    ir::Model model = onnx_import::loadModelFromBytes(data, size, kNoExternalDataDir, "<fuzz>");
    if (findUnsupportedNodes(model.graph).empty()) {
      ir::inferShapes(model.graph);
    } else {
      ir::inferShapesCollectingErrors(model.graph);
    }
  });
}

}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::loadImportAndInfer(data, size);
  return 0;
}
