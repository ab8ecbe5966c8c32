// Node attributes, independent of protobuf.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln::ir {

struct Graph;

using Attribute = std::variant<int64_t, float, std::string, Tensor, std::shared_ptr<Graph>,
                               std::vector<int64_t>, std::vector<float>, std::vector<std::string>,
                               std::vector<Tensor>, std::vector<std::shared_ptr<Graph>>>;

using AttributeMap = std::map<std::string, Attribute>;

/// "int", "float", "string", "tensor", "graph", "ints", ... for error messages.
KILN_INTERNAL_API const char* attributeKindName(const Attribute& a);

}  // namespace kiln::ir
