#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <sstream>

#include "kiln/error.h"

namespace kiln::ir {

std::string Dim::toString() const {
  if (isKnown()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

SymShape symShapeOf(const Shape& shape) {
  SymShape s;
  s.reserve(shape.size());
  for (int64_t d : shape) s.push_back(Dim::known(d));
  return s;
}

std::optional<Shape> concreteShape(const SymShape& shape) {
  Shape s;
  s.reserve(shape.size());
  for (const Dim& d : shape) {
    if (!d.isKnown()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

std::string symShapeToString(const SymShape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += "x";
    s += shape[i].toString();
  }
  return s;
}

const char* attributeKindName(const Attribute& a) {
  static const char* names[] = {"int",  "float",  "string",  "tensor",  "graph",
                                "ints", "floats", "strings", "tensors", "graphs"};
  return names[a.index()];
}

std::string Node::label() const {
  std::string s = "node '" + name + "' (";
  if (!domain.empty()) s += domain + "::";
  return s + opType + ")";
}

int Graph::findValue(const std::string& n) const {
  auto it = valueIds.find(n);
  return it == valueIds.end() ? kNoValue : it->second;
}

int Graph::addValue(const std::string& n, TypeInfo type) {
  if (valueIds.count(n))
    throw Error(ErrorCode::kInvalidModel, "tensor name '" + n + "' is defined twice");
  int id = static_cast<int>(values.size());
  values.push_back(Value{n, std::move(type), std::nullopt, -1});
  valueIds.emplace(n, id);
  return id;
}

int Graph::valueId(const std::string& n) {
  int id = findValue(n);
  return id == kNoValue ? addValue(n) : id;
}

bool Graph::isGraphInput(int id) const {
  return std::find(inputs.begin(), inputs.end(), id) != inputs.end();
}

void sortTopologically(Graph& graph) {
  const size_t n = graph.nodes.size();
  std::vector<int> producer(graph.values.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int out : graph.nodes[i].outputs) {
      if (out == kNoValue) continue;
      if (graph.isGraphInput(out)) {
        throw Error(ErrorCode::kInvalidModel,
                    graph.nodes[i].label() + " writes '" + graph.value(out).name +
                        "', which is a graph input (a tensor has one producer)");
      }
      if (producer[out] != -1) {
        throw Error(ErrorCode::kInvalidModel,
                    "tensor '" + graph.value(out).name + "' is produced by both " +
                        graph.nodes[producer[out]].label() + " and " + graph.nodes[i].label());
      }
      producer[out] = static_cast<int>(i);
    }
  }
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (size_t i = 0; i < n; ++i) {
    for (int in : graph.nodes[i].inputs) {
      if (in == kNoValue || producer[in] == -1) continue;
      ++pending[i];
      consumers[producer[in]].push_back(static_cast<int>(i));
    }
  }
  // Kahn's algorithm; a min-heap keeps the file's order among ready nodes.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (order.size() != n) {
    std::string names;
    int listed = 0;
    for (size_t i = 0; i < n && listed < 8; ++i) {
      if (pending[i] > 0) {
        names += (listed++ ? ", " : "") + graph.nodes[i].label();
      }
    }
    throw Error(ErrorCode::kInvalidModel, "the graph has a cycle through " + names);
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(sorted);
  for (Value& v : graph.values) v.producer = -1;
  for (size_t i = 0; i < n; ++i)
    for (int out : graph.nodes[i].outputs)
      if (out != kNoValue) graph.values[out].producer = static_cast<int>(i);
}

void verifyGraph(const Graph& graph) {
  auto checkId = [&](int id, const std::string& where) {
    if (id != kNoValue && (id < 0 || static_cast<size_t>(id) >= graph.values.size())) {
      throw Error(ErrorCode::kInvalidModel, where + " refers to a tensor id out of range");
    }
  };
  std::vector<bool> available(graph.values.size(), false);
  for (size_t i = 0; i < graph.values.size(); ++i)
    available[i] = graph.values[i].constant.has_value();
  for (int id : graph.inputs) {
    checkId(id, "graph input");
    available[id] = true;
  }
  for (int id : graph.outerInputs) {
    checkId(id, "outer-scope input");
    if (id != kNoValue) available[id] = true;
  }
  for (const Node& node : graph.nodes) {
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      int id = node.inputs[k];
      checkId(id, node.label());
      if (id != kNoValue && !available[id]) {
        throw Error(ErrorCode::kInvalidModel,
                    node.label() + " input " + std::to_string(k) + " '" + graph.value(id).name +
                        "' is not produced by any node, initializer or graph input");
      }
    }
    for (int id : node.outputs) {
      checkId(id, node.label());
      if (id != kNoValue) available[id] = true;
    }
  }
  for (int id : graph.outputs) {
    checkId(id, "graph output");
    if (!available[id]) {
      throw Error(ErrorCode::kInvalidModel,
                  "graph output '" + graph.value(id).name +
                      "' is not produced by any node, initializer or input");
    }
  }
}

namespace {

std::string describeValue(const Graph& g, int id) {
  if (id == kNoValue) return "<none>";
  const Value& v = g.value(id);
  std::string s = v.name + ":" + dataTypeName(v.type.dtype);
  s += v.type.shape ? "[" + symShapeToString(*v.type.shape) + "]" : "[?]";
  return s;
}

}  // namespace

std::string printGraph(const Graph& graph) {
  std::ostringstream os;
  for (int id : graph.inputs) os << "input  " << describeValue(graph, id) << "\n";
  for (int id : graph.outputs) os << "output " << describeValue(graph, id) << "\n";
  for (const Node& node : graph.nodes) {
    os << node.label() << ": ";
    for (size_t i = 0; i < node.inputs.size(); ++i)
      os << (i ? ", " : "") << describeValue(graph, node.inputs[i]);
    os << " -> ";
    for (size_t i = 0; i < node.outputs.size(); ++i)
      os << (i ? ", " : "") << describeValue(graph, node.outputs[i]);
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::ir
