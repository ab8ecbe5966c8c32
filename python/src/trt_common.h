// Shared pieces of the TensorRT-style bindings (trt_*.cpp): the Python logger behind kiln's
// ILogger, Status -> exception, and dims <-> tuples.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/status.h"
#include "kiln/timing_cache.h"

namespace kiln::python {

/// kiln's ILogger over a Python logger object (kiln.ILogger or anything with log(severity, msg)):
/// called from any thread, it takes the GIL for the call; an exception the Python log raises is
/// printed as unraisable (a logger must not throw into kiln).
class PyLogger : public ILogger {
 public:
  explicit PyLogger(nb::object logger);
  ~PyLogger() override;
  PyLogger(const PyLogger&) = delete;
  PyLogger& operator=(const PyLogger&) = delete;
  void log(Severity severity, const std::string& message) noexcept override;
  nb::object object() const { return logger_; }
  /// The last error logged (since the last call), for the exception of a call kiln refused.
  std::string takeLastError();

 private:
  nb::object logger_;
  std::mutex mutex_;
  std::string lastError_;
  nb::object severityType_;  // kiln.ILogger.Severity
};

/// A network of the Python API: the C++ network and the logger it reports to.
struct PyNetwork {
  std::shared_ptr<PyLogger> logger;
  std::unique_ptr<NetworkDefinition> network;
  uint32_t flags = 0;
};

/// A kiln.ICudaEngine made from a plan (kept for serialize()); raises when the plan is refused.
nb::object deserializeEngine(const std::shared_ptr<PyLogger>& logger, const void* data,
                             size_t size);

/// The shared logger of a Python logger object; None gives kiln's default (a kiln.Logger at
/// WARNING).
std::shared_ptr<PyLogger> makeLogger(nb::handle logger);

/// Throws the kiln::Error of a failed Status (the bindings' translator raises kiln's exception
/// classes: InvalidArgument, Fail, NoSuchFile, ...); does nothing when it succeeded.
void check(const Status& status);

/// An ITimingCache from serialized bytes (b'' for an empty one); raises on a malformed cache.
std::unique_ptr<ITimingCache> timingCacheFromBytes(nb::bytes data);

/// A dims tuple from any sequence of ints (a tuple, list, numpy shape or kiln Dims).
Shape dimsOf(nb::handle sequence, const char* what);
nb::tuple dimsTuple(const Shape& dims);

/// isinstance(object, cls), and the name of an object's type ("list", "numpy.ndarray" as
/// "ndarray").
bool isInstance(nb::handle object, nb::handle cls);
std::string typeName(nb::handle object);

/// False once the interpreter is shutting down (kiln's threads must not touch Python then).
bool interpreterAlive();

/// Releases a held Python reference (with the GIL) unless the interpreter has already shut down,
/// when it is dropped without one: for objects kept in kiln's C++ registries, which outlive it.
void releaseAtExit(nb::object& object);

}  // namespace kiln::python
