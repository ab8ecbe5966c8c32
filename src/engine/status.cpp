#include "kiln/status.h"

#include <iostream>

#include "kiln/logger.h"

namespace kiln {

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kSUCCESS: return "SUCCESS";
    case StatusCode::kINVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case StatusCode::kINVALID_GRAPH: return "INVALID_GRAPH";
    case StatusCode::kINVALID_VALUE: return "INVALID_VALUE";
    case StatusCode::kUNSUPPORTED_NODE: return "UNSUPPORTED_NODE";
    case StatusCode::kINVALID_PLAN: return "INVALID_PLAN";
    case StatusCode::kIO_ERROR: return "IO_ERROR";
    case StatusCode::kRUNTIME_ERROR: return "RUNTIME_ERROR";
    case StatusCode::kOUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case StatusCode::kINTERNAL_ERROR: return "INTERNAL_ERROR";
  }
  return "UNKNOWN";
}

Status Status::fromError(const Error& error) {
  StatusCode code = StatusCode::kINTERNAL_ERROR;
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: code = StatusCode::kINVALID_ARGUMENT; break;
    case ErrorCode::kInvalidModel: code = StatusCode::kINVALID_GRAPH; break;
    case ErrorCode::kUnsupportedNode: code = StatusCode::kUNSUPPORTED_NODE; break;
    case ErrorCode::kInvalidPlan: code = StatusCode::kINVALID_PLAN; break;
    case ErrorCode::kRuntimeError: code = StatusCode::kRUNTIME_ERROR; break;
    case ErrorCode::kIoError: code = StatusCode::kIO_ERROR; break;
  }
  return Status(code, error.what());
}

std::string Status::toString() const {
  if (ok()) return "SUCCESS";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

const char* severityName(Severity severity) {
  switch (severity) {
    case Severity::kINTERNAL_ERROR: return "internal error";
    case Severity::kERROR: return "error";
    case Severity::kWARNING: return "warning";
    case Severity::kINFO: return "info";
    case Severity::kVERBOSE: return "verbose";
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
