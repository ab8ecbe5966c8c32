// ONNX value types written as text, as kiln keeps TYPE_PROTO attributes (Optional's `type`):
// "tensor(float32)", "seq(tensor(int64))", "optional(seq(tensor(float32)))".
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// Parses a type text into a TypeInfo (no shape); fails naming the node and the text.
TypeInfo parseValueTypeText(const Node& node, const std::string& text);

}  // namespace kiln::ir
