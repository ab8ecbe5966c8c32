// What an ONNX model says about itself (ModelProto and GraphProto fields), as ONNX Runtime's
// ModelMetadata reports it.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kiln {

struct ModelMetadata {
  std::string producerName;                   // ModelProto.producer_name ("pytorch")
  std::string producerVersion;                // ModelProto.producer_version
  std::string domain;                         // ModelProto.domain
  std::string description;                    // ModelProto.doc_string
  std::optional<int64_t> version;             // ModelProto.model_version, when the model sets it
  std::string graphName;                      // GraphProto.name
  std::string graphDescription;               // GraphProto.doc_string
  std::map<std::string, std::string> custom;  // ModelProto.metadata_props
};

}  // namespace kiln
