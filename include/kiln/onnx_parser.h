// Fills a NetworkDefinition from an ONNX model, as TensorRT's nvonnxparser does.
//
//   OnnxParser parser(*network, logger);
//   if (!parser.parseFromFile("model.onnx"))
//     for (int i = 0; i < parser.getNbErrors(); ++i) std::cerr << parser.getError(i).toString() <<
//     "\n";
//
// Every unsupported operator is reported in one pass, each as its own error.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/status.h"

namespace kiln {

enum class ParserErrorCode {
  kSUCCESS,
  kINTERNAL_ERROR,
  kIO_ERROR,                  // the file cannot be read
  kMODEL_DESERIALIZE_FAILED,  // not a valid ONNX protobuf
  kINVALID_GRAPH,             // dangling inputs, cycles, duplicate names, bad initializers ...
  kINVALID_NODE,              // a node's attributes or input shapes are invalid for its operator
  kINVALID_VALUE,             // a tensor or value in the model is invalid
  kUNSUPPORTED_NODE,          // kiln has no schema or kernel for this operator at this opset
};

KILN_API const char* parserErrorCodeName(ParserErrorCode code);

struct KILN_API ParserError {
  ParserErrorCode code = ParserErrorCode::kSUCCESS;
  int nodeIndex = -1;    // index in the network's layer list; -1 when not about one node
  std::string nodeName;  // "" when not about one node
  std::string opType;
  std::string message;
  /// "UNSUPPORTED_NODE node 3 'mystery' (NoSuchOp): ..."
  std::string toString() const;
};

class KILN_API OnnxParser {
 public:
  /// The network must be empty; the parser adds inputs, layers and outputs to it.
  OnnxParser(NetworkDefinition& network, ILogger& logger);
  ~OnnxParser();

  Status parseFromFile(const std::string& path);
  /// baseDir resolves external data files.
  Status parse(const void* data, size_t size, const std::string& baseDir = ".");

  /// Errors of the last parse.
  int getNbErrors() const { return static_cast<int>(errors_.size()); }
  const ParserError& getError(int index) const { return errors_.at(static_cast<size_t>(index)); }
  void clearErrors() { errors_.clear(); }

 private:
  NetworkDefinition& network_;
  ILogger& logger_;
  std::vector<ParserError> errors_;
};

}  // namespace kiln
