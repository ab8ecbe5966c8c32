// The boundary of the status-returning API: internal code throws kiln::Error; these helpers
// turn every exception into a Status so that none crosses the public API.
#pragma once
#include <exception>
#include <new>
#include <string>

#include "kiln/error.h"
#include "kiln/logger.h"
#include "kiln/status.h"

namespace kiln {

/// Runs fn (which returns void); any exception becomes the returned Status, logged as an error.
template <typename Fn>
Status guardStatus(ILogger* logger, Fn&& fn) {
  Status status;
  try {
    fn();
    return status;
  } catch (const Error& e) {
    status = Status::fromError(e);
  } catch (const std::bad_alloc&) {
    status = Status(ErrorCode::kOutOfMemory, "out of memory");
  } catch (const std::exception& e) {
    status = Status(ErrorCode::kInternalError, std::string("internal error: ") + e.what());
  } catch (...) {
    status = Status(ErrorCode::kInternalError, "internal error: unknown exception");
  }
  if (logger) logger->log(Severity::kERROR, status.message());
  return status;
}

/// Same for functions that produce a value.
template <typename T, typename Fn>
Result<T> guardResult(ILogger* logger, Fn&& fn) {
  std::optional<T> value;
  Status status = guardStatus(logger, [&] { value.emplace(fn()); });
  if (!status.ok()) return status;
  return std::move(*value);
}

}  // namespace kiln
