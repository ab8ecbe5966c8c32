// Errors as ONNX Runtime's Python API raises them: "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT :
// ...", as instances of its classes (kiln.capi.onnxruntime_pybind11_state.InvalidArgument, ...).
#pragma once
#include <stdexcept>
#include <string>

namespace kiln::python {

/// ONNX Runtime's status codes, in its numbering.
enum class OrtCode {
  kFail = 1,
  kInvalidArgument = 2,
  kNoSuchFile = 3,
  kNoModel = 4,
  kEngineError = 5,
  kRuntimeException = 6,
  kInvalidProtobuf = 7,
  kModelLoaded = 8,
  kNotImplemented = 9,
  kInvalidGraph = 10,
  kEpFail = 11,
};

/// Thrown by the bindings for an error kiln's C++ API does not raise itself; becomes the
/// Python exception of `code`.
class OrtError : public std::runtime_error {
 public:
  OrtError(OrtCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  OrtCode code() const { return code_; }

 private:
  OrtCode code_;
};

}  // namespace kiln::python
