// The pieces of the kiln._kiln extension: module.cpp calls one bind function per source file.
#pragma once
#include <nanobind/nanobind.h>

namespace kiln::python {

namespace nb = nanobind;

/// ONNX Runtime's exception classes (Fail, InvalidArgument, ...) and the kiln::Error translator.
void bindErrors(nb::module_& m);
/// TensorBuffer (the buffer numpy outputs view) and the tensor conversion helpers for tests.
void bindTensors(nb::module_& m);
/// Session: the ONNX Runtime-style inference session under kiln.InferenceSession.
void bindSession(nb::module_& m);
/// load_plugin_library: C++ plugin libraries.
void bindPlugins(nb::module_& m);
/// The TensorRT-style API (trt_*.cpp): network definition, builder, parser, runtime, plugins.
void bindTrtNetwork(nb::module_& m);
void bindTrtBuilder(nb::module_& m);
void bindTrtTimingCache(nb::module_& m);
void bindTrtParser(nb::module_& m);
void bindTrtRuntime(nb::module_& m);
void bindTrtPlugins(nb::module_& m);
/// Custom ops written in Python (kiln.custom_op).
void bindCustomOps(nb::module_& m);

}  // namespace kiln::python
