// Which layers of a QDQ model run INT8, and why the others do not: one line per kiln::QConv /
// kiln::QGemm layer and per Conv / MatMul / Gemm the QDQ fusion left in float32 (opt/fuse_qdq.cpp
// records the reason on the node). `kiln build --verbose` and `kiln inspect PLAN` print them.
#pragma once
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/engine.h"

namespace kiln::build {

/// The lines for a built graph and its layers (layers[i] describes graph.nodes[i]); empty when
/// no layer was quantized or refused (a float model).
KILN_INTERNAL_API std::vector<std::string> int8LayerReport(const ir::Graph& graph,
                                                           const std::vector<LayerInfo>& layers);

}  // namespace kiln::build
