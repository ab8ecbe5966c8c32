// Typed attribute access for nodes; a missing or mistyped attribute is an error naming the node.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir {

KILN_INTERNAL_API bool hasAttr(const Node& node, const std::string& name);
KILN_INTERNAL_API int64_t attrInt(const Node& node, const std::string& name);
KILN_INTERNAL_API int64_t attrInt(const Node& node, const std::string& name, int64_t fallback);
KILN_INTERNAL_API float attrFloat(const Node& node, const std::string& name);
KILN_INTERNAL_API float attrFloat(const Node& node, const std::string& name, float fallback);
KILN_INTERNAL_API std::string attrString(const Node& node, const std::string& name);
KILN_INTERNAL_API std::string attrString(const Node& node, const std::string& name,
                                         const std::string& fallback);
KILN_INTERNAL_API std::vector<int64_t> attrInts(const Node& node, const std::string& name);
KILN_INTERNAL_API std::vector<int64_t> attrInts(const Node& node, const std::string& name,
                                                const std::vector<int64_t>& fallback);
KILN_INTERNAL_API std::vector<float> attrFloats(const Node& node, const std::string& name);
KILN_INTERNAL_API std::vector<float> attrFloats(const Node& node, const std::string& name,
                                                const std::vector<float>& fallback);
KILN_INTERNAL_API std::vector<std::string> attrStrings(const Node& node, const std::string& name);
const Tensor& attrTensor(const Node& node, const std::string& name);
KILN_INTERNAL_API std::shared_ptr<Graph> attrGraph(const Node& node, const std::string& name);

[[noreturn]] void failNode(const Node& node, const std::string& message,
                           ErrorCode code = ErrorCode::kInvalidModel);

}  // namespace kiln::ir
