// Errors raised by kiln. Every message names the file, node or tensor concerned.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

enum class ErrorCode {
  kInvalidArgument,   // bad input from the caller (wrong shape, unknown input name, ...)
  kInvalidModel,      // the model file or graph is malformed
  kUnsupportedNode,   // an operator, attribute or type kiln does not implement
  kInvalidPlan,       // a plan file is malformed
  kRuntimeError,      // a kernel failed while running
  kIoError,           // a file could not be read or written
};

const char* errorCodeName(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace kiln
