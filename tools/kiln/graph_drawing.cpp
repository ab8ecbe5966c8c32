#include "graph_drawing.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kiln/error.h"

extern char** environ;

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

// A DOT string literal's content: quotes and backslashes escaped, lines joined by \n.
std::string dotText(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\\n";
    for (char c : lines[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += (c == '\n' || c == '\r') ? ' ' : c;
    }
  }
  return out;
}

std::string typeText(const ir::TypeInfo& type) {
  if (type.mapKeyType != DataType::kUndefined) {
    return "sequence of map<" + dataTypeName(type.mapKeyType) + "," + dataTypeName(type.dtype) +
           ">";
  }
  if (type.isSequence) return "sequence of " + dataTypeName(type.dtype);
  return dataTypeName(type.dtype) + "[" + (type.shape ? ir::symShapeToString(*type.shape) : "?") +
         "]";
}

bool isBlockedProducer(const ir::Node& node) {
  return node.domain == "kiln" &&
         (node.opType.rfind("Nchwc", 0) == 0 || node.opType == "ReorderToNchwc");
}

// Which values are in the blocked NCHWc layout (src/ir/ops/nchwc.h): the outputs of the NCHWc
// layers, and of the per-element layers the layout pass lets run on them, up to ReorderFromNchwc.
std::vector<bool> blockedValues(const ir::Graph& graph) {
  std::vector<bool> blocked(graph.values.size(), false);
  for (const ir::Node& node : graph.nodes) {
    bool out = isBlockedProducer(node);
    if (!out && !(node.domain == "kiln" && node.opType == "ReorderFromNchwc")) {
      for (int id : node.inputs)
        out = out || (id != ir::kNoValue && !graph.value(id).constant && blocked[id]);
    }
    for (int id : node.outputs)
      if (id != ir::kNoValue) blocked[id] = out;
  }
  return blocked;
}

// The DOT body shared by both drawings: input and output ellipses, node boxes, labelled edges.
class DotWriter {
 public:
  explicit DotWriter(const ir::Graph& graph) : graph_(graph) {
    out_ << "digraph kiln {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", "
            "fontsize=10];\n"
         << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    for (size_t k = 0; k < graph.inputs.size(); ++k) {
      const int id = graph.inputs[k];
      if (graph.value(id).constant) continue;  // an initializer with a default: a weight
      producer_[id] = "input" + std::to_string(k);
      ellipse(producer_[id], {"input", graph.value(id).name, typeText(graph.value(id).type)});
    }
  }

  void node(size_t index, const std::vector<std::string>& lines) {
    const std::string id = "n" + std::to_string(index);
    out_ << "  " << id << " [label=\"" << dotText(lines) << "\"];\n";
    const ir::Node& n = graph_.nodes[index];
    for (int in : n.inputs) edge(in, id);
    for (int o : n.outputs)
      if (o != ir::kNoValue) producer_[o] = id;
  }

  std::string finish() {
    for (size_t k = 0; k < graph_.outputs.size(); ++k) {
      const int id = graph_.outputs[k];
      const std::string name = "output" + std::to_string(k);
      ellipse(name, {"output", graph_.value(id).name, typeText(graph_.value(id).type)});
      edge(id, name);
    }
    out_ << "}\n";
    return out_.str();
  }

 private:
  void ellipse(const std::string& id, const std::vector<std::string>& lines) {
    out_ << "  " << id << " [shape=ellipse, label=\"" << dotText(lines) << "\"];\n";
  }
  void edge(int value, const std::string& to) {
    if (value == ir::kNoValue) return;
    auto it = producer_.find(value);
    if (it == producer_.end()) return;  // a weight or folded constant
    out_ << "  " << it->second << " -> " << to << " [label=\""
         << dotText({typeText(graph_.value(value).type)}) << "\"];\n";
  }

  const ir::Graph& graph_;
  std::ostringstream out_;
  std::map<int, std::string> producer_;
};

std::string outputShapes(const ir::Graph& graph, const ir::Node& node) {
  std::string text;
  for (int id : node.outputs)
    if (id != ir::kNoValue) text += (text.empty() ? "" : ", ") + typeText(graph.value(id).type);
  return "out " + text;
}

std::string opName(const ir::Node& node) {
  return node.domain.empty() ? node.opType : node.domain + "::" + node.opType;
}

// `dot` on PATH, or "".
std::string findDot() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/dot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

void render(const std::string& dot, const std::string& format, const std::string& path) {
  const std::string program = findDot();
  if (program.empty()) {
    throw Error(ErrorCode::kIoError,
                path + ": rendering ." + format +
                    " needs Graphviz's `dot`, which is not on PATH "
                    "(install the Debian package graphviz, or write a .dot file)");
  }
  const std::string source = path + ".dot.tmp";
  std::ofstream(source) << dot;
  std::vector<std::string> args = {program, "-T" + format, source, "-o", path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int status = 0;
  const int spawned = posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv.data(), environ);
  const bool ok = spawned == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0;
  std::error_code ec;
  fs::remove(source, ec);
  if (!ok)
    throw Error(ErrorCode::kIoError, path + ": `dot -T" + format + "` failed to render the graph");
}

}  // namespace

std::string planToDot(const plan::Plan& plan) {
  const ir::Graph& graph = *plan.graph;
  const std::vector<bool> blocked = blockedValues(graph);
  DotWriter dot(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = graph.nodes[i];
    const LayerInfo& layer = plan.layers.at(i);
    std::vector<std::string> lines = {layer.name, opName(node),
                                      "kernel " + layer.kernel + " (" + layer.kernelIsa + ")"};
    const bool nchwc =
        !node.outputs.empty() && node.outputs[0] != ir::kNoValue && blocked[node.outputs[0]];
    lines.push_back("layout " + std::string(nchwc ? "nchwc16" : "plain") + ", precision " +
                    layer.precision);
    if (!layer.fusedFrom.empty()) {
      std::string fused;
      for (const std::string& f : layer.fusedFrom) fused += (fused.empty() ? "" : ", ") + f;
      lines.push_back("fused " + fused);
    }
    lines.push_back(outputShapes(graph, node));
    dot.node(i, lines);
  }
  return dot.finish();
}

std::string modelGraphToDot(const ir::Graph& graph) {
  DotWriter dot(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const ir::Node& node = graph.nodes[i];
    dot.node(i, {node.name, opName(node), outputShapes(graph, node)});
  }
  return dot.finish();
}

void writeGraphPicture(const std::string& dot, const std::string& path) {
  const std::string suffix = fs::path(path).extension().string();
  if (suffix == ".dot" || suffix == ".gv") {
    std::ofstream out(path);
    if (!(out << dot)) throw Error(ErrorCode::kIoError, path + ": cannot write the graph");
    return;
  }
  if (suffix != ".svg" && suffix != ".png") {
    throw Error(ErrorCode::kInvalidArgument,
                path + ": --graph writes .dot, .svg or .png files, not '" + suffix + "'");
  }
  render(dot, suffix.substr(1), path);
}

}  // namespace kiln::cli
