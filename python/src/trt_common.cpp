#include "trt_common.h"

#include <Python.h>

#include <nanobind/stl/string.h>

#include "kiln/error.h"

namespace kiln::python {

PyLogger::PyLogger(nb::object logger)
    : logger_(std::move(logger)),
      severityType_(nb::module_::import_("kiln._logger").attr("Severity")) {}

PyLogger::~PyLogger() {
  releaseAtExit(logger_);
  releaseAtExit(severityType_);
}

std::string PyLogger::takeLastError() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string message = std::move(lastError_);
  lastError_.clear();
  return message;
}

bool isInstance(nb::handle object, nb::handle cls) {
  const int result = PyObject_IsInstance(object.ptr(), cls.ptr());
  if (result < 0) throw nb::python_error();
  return result == 1;
}

std::string typeName(nb::handle object) { return Py_TYPE(object.ptr())->tp_name; }

bool interpreterAlive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

void PyLogger::log(Severity severity, const std::string& message) noexcept {
  if (severity <= Severity::kERROR) {
    std::lock_guard<std::mutex> lock(mutex_);
    lastError_ = message;
  }
  if (!interpreterAlive()) return;
  nb::gil_scoped_acquire gil;
  try {
    logger_.attr("log")(severityType_(static_cast<int>(severity)), message);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(logger_.attr("log"));
  } catch (...) {
  }
}

std::shared_ptr<PyLogger> makeLogger(nb::handle logger) {
  if (logger.is_none())
    return std::make_shared<PyLogger>(nb::module_::import_("kiln._logger").attr("Logger")());
  if (!nb::hasattr(logger, "log"))
    throw nb::type_error(
        "logger must be a kiln.ILogger (an object with a log(severity, msg) method)");
  return std::make_shared<PyLogger>(nb::borrow(logger));
}

void check(const Status& status) {
  if (!status.ok()) throw Error(status.code(), status.message());
}

Shape dimsOf(nb::handle sequence, const char* what) {
  if (PyLong_Check(sequence.ptr())) return {nb::cast<int64_t>(sequence)};
  if (!PySequence_Check(sequence.ptr()) && !nb::hasattr(sequence, "__iter__")) {
    throw nb::type_error(
        (std::string(what) + " must be a sequence of ints, not " + typeName(sequence)).c_str());
  }
  Shape dims;
  for (nb::handle d : sequence) {
    if (!PyLong_Check(d.ptr()) && !PyIndex_Check(d.ptr())) {
      throw nb::type_error((std::string(what) + " must hold ints; got a " + typeName(d)).c_str());
    }
    dims.push_back(nb::cast<int64_t>(nb::int_(d)));
  }
  return dims;
}

nb::tuple dimsTuple(const Shape& dims) {
  nb::list items;
  for (int64_t d : dims) items.append(d);
  return nb::tuple(items);
}

void releaseAtExit(nb::object& object) {
  if (!object.is_valid()) return;
  if (interpreterAlive()) {
    nb::gil_scoped_acquire gil;
    object.reset();
  } else {
    (void)object.release();  // the interpreter is gone: nothing to give the reference back to
  }
}

}  // namespace kiln::python
