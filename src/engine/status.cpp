#include "kiln/status.h"

#include <iostream>

#include "kiln/logger.h"

namespace kiln {

Status Status::fromError(const Error& error) {
  return Status(error.code() == ErrorCode::kSuccess ? ErrorCode::kInternalError : error.code(),
                error.what());
}

std::string Status::toString() const {
  if (ok()) return "SUCCESS";
  return std::string(errorCodeName(code_)) + ": " + message_;
}

const char* severityName(Severity severity) {
  switch (severity) {
    case Severity::kINTERNAL_ERROR:
      return "internal error";
    case Severity::kERROR:
      return "error";
    case Severity::kWARNING:
      return "warning";
    case Severity::kINFO:
      return "info";
    case Severity::kVERBOSE:
      return "verbose";
  }
  return "log";
}

void StderrLogger::log(Severity severity, const std::string& message) noexcept {
  if (static_cast<int>(severity) > static_cast<int>(threshold_)) return;
  try {
    std::cerr << "[kiln] " << severityName(severity) << ": " << message << "\n";
  } catch (...) {
  }
}

}  // namespace kiln
