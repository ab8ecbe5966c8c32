#include "ir/node_attrs.h"

#include "kiln/error.h"

namespace kiln::ir {

void failNode(const Node& node, const std::string& message, ErrorCode code) {
  throw Error(code, node.label() + ": " + message);
}

namespace {

template <typename T>
const T* findAttr(const Node& node, const std::string& name, const char* expected) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return nullptr;
  if (const T* v = std::get_if<T>(&it->second)) return v;
  failNode(node, "attribute '" + name + "' should be of type " + expected + ", got " +
                     attributeKindName(it->second));
}

template <typename T>
const T& requireAttr(const Node& node, const std::string& name, const char* expected) {
  const T* v = findAttr<T>(node, name, expected);
  if (!v) failNode(node, "required attribute '" + name + "' is missing");
  return *v;
}

}  // namespace

bool hasAttr(const Node& node, const std::string& name) { return node.attrs.count(name) > 0; }

int64_t attrInt(const Node& node, const std::string& name) {
  return requireAttr<int64_t>(node, name, "int");
}
int64_t attrInt(const Node& node, const std::string& name, int64_t fallback) {
  const int64_t* v = findAttr<int64_t>(node, name, "int");
  return v ? *v : fallback;
}
float attrFloat(const Node& node, const std::string& name) {
  return requireAttr<float>(node, name, "float");
}
float attrFloat(const Node& node, const std::string& name, float fallback) {
  const float* v = findAttr<float>(node, name, "float");
  return v ? *v : fallback;
}
std::string attrString(const Node& node, const std::string& name) {
  return requireAttr<std::string>(node, name, "string");
}
std::string attrString(const Node& node, const std::string& name, const std::string& fallback) {
  const std::string* v = findAttr<std::string>(node, name, "string");
  return v ? *v : fallback;
}
std::vector<int64_t> attrInts(const Node& node, const std::string& name) {
  return requireAttr<std::vector<int64_t>>(node, name, "ints");
}
std::vector<int64_t> attrInts(const Node& node, const std::string& name,
                              const std::vector<int64_t>& fallback) {
  const auto* v = findAttr<std::vector<int64_t>>(node, name, "ints");
  return v ? *v : fallback;
}
std::vector<float> attrFloats(const Node& node, const std::string& name) {
  return requireAttr<std::vector<float>>(node, name, "floats");
}
std::vector<float> attrFloats(const Node& node, const std::string& name,
                              const std::vector<float>& fallback) {
  const auto* v = findAttr<std::vector<float>>(node, name, "floats");
  return v ? *v : fallback;
}
std::vector<std::string> attrStrings(const Node& node, const std::string& name) {
  return requireAttr<std::vector<std::string>>(node, name, "strings");
}
const Tensor& attrTensor(const Node& node, const std::string& name) {
  return requireAttr<Tensor>(node, name, "tensor");
}
std::shared_ptr<Graph> attrGraph(const Node& node, const std::string& name) {
  return requireAttr<std::shared_ptr<Graph>>(node, name, "graph");
}

}  // namespace kiln::ir
