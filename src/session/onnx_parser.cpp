// OnnxParser: ONNX file -> NetworkDefinition (one layer per node), with every problem reported
// as its own ParserError.
#include "kiln/onnx_parser.h"

#include <functional>

#include "build/network_impl.h"
#include "engine/executor.h"
#include "ir/op_schema.h"
#include "onnx/loader.h"
#include "plugin/plugin_node.h"

namespace kiln {

const char* parserErrorCodeName(ParserErrorCode code) {
  switch (code) {
    case ParserErrorCode::kSUCCESS:
      return "SUCCESS";
    case ParserErrorCode::kINTERNAL_ERROR:
      return "INTERNAL_ERROR";
    case ParserErrorCode::kIO_ERROR:
      return "IO_ERROR";
    case ParserErrorCode::kMODEL_DESERIALIZE_FAILED:
      return "MODEL_DESERIALIZE_FAILED";
    case ParserErrorCode::kINVALID_GRAPH:
      return "INVALID_GRAPH";
    case ParserErrorCode::kINVALID_NODE:
      return "INVALID_NODE";
    case ParserErrorCode::kINVALID_VALUE:
      return "INVALID_VALUE";
    case ParserErrorCode::kUNSUPPORTED_NODE:
      return "UNSUPPORTED_NODE";
  }
  return "UNKNOWN";
}

std::string ParserError::toString() const {
  std::string s = parserErrorCodeName(code);
  if (nodeIndex >= 0)
    s += " node " + std::to_string(nodeIndex) + " '" + nodeName + "' (" + opType + ")";
  return s + ": " + message;
}

OnnxParser::OnnxParser(NetworkDefinition& network, ILogger& logger)
    : network_(network), logger_(logger) {}
OnnxParser::~OnnxParser() = default;

namespace {

ParserErrorCode codeFor(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kIoError:
      return ParserErrorCode::kIO_ERROR;
    case ErrorCode::kUnsupportedNode:
      return ParserErrorCode::kUNSUPPORTED_NODE;
    case ErrorCode::kInvalidArgument:
      return ParserErrorCode::kINVALID_VALUE;
    case ErrorCode::kInvalidModel:
      return std::string(e.what()).find("not a valid ONNX model") != std::string::npos
                 ? ParserErrorCode::kMODEL_DESERIALIZE_FAILED
                 : ParserErrorCode::kINVALID_GRAPH;
    default:
      return ParserErrorCode::kINTERNAL_ERROR;
  }
}

// The node an error message names ("node 'conv1' (Conv)"), or -1.
int nodeNamedIn(const ir::Graph& g, const std::string& message) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (message.find(g.nodes[i].label()) != std::string::npos) return static_cast<int>(i);
  return -1;
}

// Loads a model and, if kiln supports all of it, makes it the network's content.
Status installModel(NetworkDefinition& network_, ILogger& logger_,
                    std::vector<ParserError>& errors_, const std::string& displayName,
                    const std::function<ir::Model()>& load) {
  errors_.clear();
  auto report = [&](ParserErrorCode code, const ir::Graph* g, int node,
                    const std::string& message) {
    ParserError e{code, node, "", "", message};
    if (g && node >= 0) {
      e.nodeName = g->nodes[static_cast<size_t>(node)].name;
      e.opType = g->nodes[static_cast<size_t>(node)].opType;
    }
    logger_.log(Severity::kERROR, e.toString());
    errors_.push_back(std::move(e));
  };
  if (!network_.impl().empty()) {
    report(ParserErrorCode::kINVALID_GRAPH, nullptr, -1,
           displayName + ": the network must be empty before parsing");
    return Status(ErrorCode::kInvalidArgument, errors_.back().message);
  }
  ir::Model model;
  try {
    model = load();
  } catch (const Error& e) {
    report(codeFor(e), nullptr, -1, e.what());
    return Status::fromError(e);
  } catch (const std::exception& e) {
    report(ParserErrorCode::kINTERNAL_ERROR, nullptr, -1, displayName + ": " + e.what());
    return Status(ErrorCode::kInternalError, errors_.back().message);
  }
  ir::Graph& g = model.graph;
  // Every unsupported node at once, each its own error.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Graph single;
    single.nodes = {g.nodes[i]};
    std::vector<std::string> problem = findUnsupportedNodes(single);
    if (problem.empty()) continue;
    std::string missingPlugin =
        plugin::describeMissingPlugin(g.nodes[i]);  // where kiln looked for a plugin
    report(ParserErrorCode::kUNSUPPORTED_NODE, &g, static_cast<int>(i),
           problem[0] + (missingPlugin.empty() ? "" : "; " + missingPlugin));
  }
  if (!errors_.empty()) {
    return Status(ErrorCode::kUnsupportedNode,
                  displayName + ": " + std::to_string(errors_.size()) + " unsupported node" +
                      (errors_.size() > 1 ? "s" : "") + ", first: " + errors_[0].message);
  }
  try {
    ir::inferShapes(g);
  } catch (const Error& e) {
    int node = nodeNamedIn(g, e.what());
    report(node >= 0 ? ParserErrorCode::kINVALID_NODE : codeFor(e), &g, node,
           displayName + ": " + e.what());
    // What inference finds unsupported (a type kiln cannot hold) stays unsupported, as in Session.
    const ErrorCode code = e.code() == ErrorCode::kUnsupportedNode ? ErrorCode::kUnsupportedNode
                                                                   : ErrorCode::kInvalidValue;
    return Status(code, errors_.back().message);
  }
  network_.impl().adoptGraph(std::move(g), displayName);
  logger_.log(Severity::kINFO,
              displayName + ": parsed " + std::to_string(network_.getNbLayers()) + " layers");
  return Status();
}

}  // namespace

Status OnnxParser::parseFromFile(const std::string& path) {
  return installModel(network_, logger_, errors_, path,
                      [&] { return onnx_import::loadModel(path, nullptr, &logger_); });
}

Status OnnxParser::parse(const void* data, size_t size, const std::string& baseDir) {
  return installModel(network_, logger_, errors_, "<memory>", [&] {
    return onnx_import::loadModelFromBytes(data, size, baseDir, "<memory>", nullptr, &logger_);
  });
}

}  // namespace kiln
