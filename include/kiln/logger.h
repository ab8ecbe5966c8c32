// Messages from the parser, builder and runtime go to a logger the application provides, as in
// TensorRT.
#pragma once
#include <string>
#include "kiln/export.h"

namespace kiln {

enum class Severity { kINTERNAL_ERROR = 0, kERROR = 1, kWARNING = 2, kINFO = 3, kVERBOSE = 4 };

/// "internal error", "error", "warning", "info", "verbose".
KILN_API const char* severityName(Severity severity);

class KILN_API ILogger {
 public:
  virtual ~ILogger() = default;
  /// Called from any thread; must not throw.
  virtual void log(Severity severity, const std::string& message) noexcept = 0;
};

/// Writes "[kiln] warning: message" to stderr for messages at or above a severity.
class KILN_API StderrLogger : public ILogger {
 public:
  explicit StderrLogger(Severity threshold = Severity::kWARNING) : threshold_(threshold) {}
  void log(Severity severity, const std::string& message) noexcept override;
  void setThreshold(Severity threshold) { threshold_ = threshold; }

 private:
  Severity threshold_;
};

}  // namespace kiln
