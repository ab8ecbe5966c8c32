// An ONNX model built in a test, saved, loaded through the importer and shape-inferred: the
// graph the optimisation passes and the executor start from.
#pragma once
#include <string>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "model_builder.h"
#include "onnx/loader.h"

namespace kiln::testing {

/// The graph of `model`, saved under a temporary folder named after `tag` and loaded back.
inline ir::Graph loadInferredGraph(const onnx::ModelProto& model, const std::string& tag) {
  ir::Model loaded = onnx_import::loadModel(saveModel(model, tempDir(tag) / "m.onnx"));
  ir::inferShapes(loaded.graph);
  return std::move(loaded.graph);
}

}  // namespace kiln::testing
