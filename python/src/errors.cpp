#include "errors.h"

#include <Python.h>

#include <array>

#include "bindings.h"
#include "kiln/error.h"

namespace kiln::python {

namespace {

struct OrtClass {
  OrtCode code;
  const char* className;  // ONNX Runtime's Python class
  const char* codeName;   // the name in its messages
  const char* doc;
};

constexpr std::array<OrtClass, 11> kOrtClasses{{
    {OrtCode::kFail, "Fail", "FAIL", "A run or a plugin failed (onnxruntime's FAIL)."},
    {OrtCode::kInvalidArgument, "InvalidArgument", "INVALID_ARGUMENT",
     "A wrong input name, type, rank or dimension, or a bad option (INVALID_ARGUMENT)."},
    {OrtCode::kNoSuchFile, "NoSuchFile", "NO_SUCHFILE",
     "The model file cannot be opened (NO_SUCHFILE)."},
    {OrtCode::kNoModel, "NoModel", "NO_MODEL", "onnxruntime's NO_MODEL (kiln does not raise it)."},
    {OrtCode::kEngineError, "EngineError", "ENGINE_ERROR",
     "onnxruntime's ENGINE_ERROR (kiln does not raise it)."},
    {OrtCode::kRuntimeException, "RuntimeException", "RUNTIME_EXCEPTION",
     "onnxruntime's RUNTIME_EXCEPTION (kiln does not raise it)."},
    {OrtCode::kInvalidProtobuf, "InvalidProtobuf", "INVALID_PROTOBUF",
     "The model's bytes are not an ONNX ModelProto (INVALID_PROTOBUF)."},
    {OrtCode::kModelLoaded, "ModelLoaded", "MODEL_LOADED",
     "onnxruntime's MODEL_LOADED (kiln does not raise it)."},
    {OrtCode::kNotImplemented, "NotImplemented", "NOT_IMPLEMENTED",
     "The model uses operators kiln does not implement; the message lists every such node "
     "(NOT_IMPLEMENTED)."},
    {OrtCode::kInvalidGraph, "InvalidGraph", "INVALID_GRAPH",
     "The model's graph is malformed (INVALID_GRAPH)."},
    {OrtCode::kEpFail, "EPFail", "EP_FAIL", "onnxruntime's EP_FAIL (kiln does not raise it)."},
}};

// The Python classes, in kOrtClasses' order; created once, never freed (they live as long as
// the interpreter).
std::array<PyObject*, kOrtClasses.size()> ortExceptionTypes{};

OrtCode ortCodeOf(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument:
      return OrtCode::kInvalidArgument;
    case ErrorCode::kUnsupportedNode:
      return OrtCode::kNotImplemented;
    case ErrorCode::kIoError:
      return OrtCode::kNoSuchFile;
    case ErrorCode::kInvalidValue:
      return OrtCode::kInvalidGraph;
    case ErrorCode::kInvalidModel:
      // The loader's one message for bytes that are not a ModelProto (src/onnx/loader.cpp);
      // ONNX Runtime calls that INVALID_PROTOBUF and any other bad model INVALID_GRAPH.
      return std::string(e.what()).find("not a valid ONNX model") != std::string::npos
                 ? OrtCode::kInvalidProtobuf
                 : OrtCode::kInvalidGraph;
    case ErrorCode::kSuccess:
    case ErrorCode::kInvalidPlan:
    case ErrorCode::kRuntimeError:
    case ErrorCode::kOutOfMemory:
    case ErrorCode::kInternalError:
      return OrtCode::kFail;
  }
  return OrtCode::kFail;
}

void raise(OrtCode code, const char* message) {
  for (size_t i = 0; i < kOrtClasses.size(); ++i) {
    if (kOrtClasses[i].code != code) continue;
    const std::string text = "[ONNXRuntimeError] : " + std::to_string(static_cast<int>(code)) +
                             " : " + kOrtClasses[i].codeName + " : " + message;
    PyErr_SetString(ortExceptionTypes[i], text.c_str());
    return;
  }
  PyErr_SetString(PyExc_RuntimeError, message);
}

}  // namespace

void bindErrors(nb::module_& m) {
  for (size_t i = 0; i < kOrtClasses.size(); ++i) {
    // Named as the classes of onnxruntime.capi.onnxruntime_pybind11_state, which derive from
    // Exception.
    const std::string qualified =
        std::string("kiln.capi.onnxruntime_pybind11_state.") + kOrtClasses[i].className;
    PyObject* type =
        PyErr_NewExceptionWithDoc(qualified.c_str(), kOrtClasses[i].doc, PyExc_Exception, nullptr);
    if (!type) throw nb::python_error();
    ortExceptionTypes[i] = type;
    m.attr(kOrtClasses[i].className) = nb::handle(type);
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(ortCodeOf(e), e.what());
    } catch (const OrtError& e) {
      raise(e.code(), e.what());
    }
  });
}

}  // namespace kiln::python
