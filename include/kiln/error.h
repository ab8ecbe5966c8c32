// Errors raised by kiln. Every message names the file, node or tensor concerned.
#pragma once
#include <stdexcept>
#include <string>
#include "kiln/export.h"

namespace kiln {

/// What went wrong: the code of a kiln::Error (thrown by Session, the ONNX Runtime-style API) and
/// of a Status (returned by the build/run API: network, parser, builder, engine).
enum class ErrorCode {
  kSuccess,          // a Status that is not an error
  kInvalidArgument,  // a bad value from the caller: unknown tensor name, shape outside the profile,
                     // ...
  kInvalidModel,     // the model file or network is malformed
  kInvalidValue,     // a node or layer has an invalid attribute or input
  kUnsupportedNode,  // an operator, attribute or type kiln does not implement
  kInvalidPlan,    // a plan file is truncated, corrupted, or from another format version or machine
  kIoError,        // a file could not be read or written
  kRuntimeError,   // a kernel failed while running
  kOutOfMemory,    // an allocation failed or exceeds a limit
  kInternalError,  // a bug in kiln
};

/// "SUCCESS", "INVALID_ARGUMENT", "INVALID_MODEL", ... (Status::toString's prefix).
KILN_API const char* errorCodeName(ErrorCode code);

class KILN_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace kiln
