// Typed attribute access for nodes; a missing or mistyped attribute is an error naming the node.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/error.h"

namespace kiln::ir {

bool hasAttr(const Node& node, const std::string& name);
int64_t attrInt(const Node& node, const std::string& name);
int64_t attrInt(const Node& node, const std::string& name, int64_t fallback);
float attrFloat(const Node& node, const std::string& name);
float attrFloat(const Node& node, const std::string& name, float fallback);
std::string attrString(const Node& node, const std::string& name);
std::string attrString(const Node& node, const std::string& name, const std::string& fallback);
std::vector<int64_t> attrInts(const Node& node, const std::string& name);
std::vector<int64_t> attrInts(const Node& node, const std::string& name,
                              const std::vector<int64_t>& fallback);
std::vector<float> attrFloats(const Node& node, const std::string& name);
std::vector<float> attrFloats(const Node& node, const std::string& name,
                              const std::vector<float>& fallback);
std::vector<std::string> attrStrings(const Node& node, const std::string& name);
const Tensor& attrTensor(const Node& node, const std::string& name);
std::shared_ptr<Graph> attrGraph(const Node& node, const std::string& name);

[[noreturn]] void failNode(const Node& node, const std::string& message,
                           ErrorCode code = ErrorCode::kInvalidModel);

}  // namespace kiln::ir
