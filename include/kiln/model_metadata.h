// What an ONNX model says about itself (ModelProto and GraphProto fields), as ONNX Runtime's
// ModelMetadata reports it.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace kiln {

struct ModelMetadata {
  std::string producerName;      // ModelProto.producer_name ("pytorch")
  std::string producerVersion;   // ModelProto.producer_version
  std::string domain;            // ModelProto.domain
  std::string description;       // ModelProto.doc_string
  int64_t version = 0;           // ModelProto.model_version
  std::string graphName;         // GraphProto.name
  std::string graphDescription;  // GraphProto.doc_string
  std::map<std::string, std::string> custom;  // ModelProto.metadata_props
};

}  // namespace kiln
