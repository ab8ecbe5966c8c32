// Error values of kiln's build/run API (network, parser, builder, engine). Functions of that API
// return a Status or a Result<T>; they never throw. (Session, the ONNX Runtime-style API, throws
// kiln::Error instead.)
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "kiln/error.h"

namespace kiln {

enum class StatusCode {
  kSUCCESS,
  kINVALID_ARGUMENT,   // a bad value from the caller: unknown tensor name, shape outside the profile, ...
  kINVALID_GRAPH,      // the network or model is malformed
  kINVALID_VALUE,      // a node or layer has an invalid attribute or input
  kUNSUPPORTED_NODE,   // an operator, attribute or type kiln does not implement
  kINVALID_PLAN,       // a plan file is truncated, corrupted, or from another format version or machine
  kIO_ERROR,           // a file could not be read or written
  kRUNTIME_ERROR,      // a kernel failed while running
  kOUT_OF_MEMORY,      // an allocation failed or exceeds a limit
  kINTERNAL_ERROR,     // a bug in kiln
};

/// "SUCCESS", "INVALID_ARGUMENT", ...
const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status success() { return Status(); }
  /// The status matching an internal error (kiln::Error codes map onto StatusCode).
  static Status fromError(const Error& error);

  bool ok() const { return code_ == StatusCode::kSUCCESS; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_PLAN: model.kiln: plan is truncated ..." ("SUCCESS" when ok).
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kSUCCESS;
  std::string message_;
};

/// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like std::optional
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Status(StatusCode::kINTERNAL_ERROR, "a Result was made from a success Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }

  /// The value; calling these on a failed Result throws kiln::Error with the status message.
  T& value() & { check(); return *value_; }
  const T& value() const& { check(); return *value_; }
  T&& value() && { check(); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!value_) throw Error(ErrorCode::kInvalidArgument, "value() of a failed Result: " + status_.toString());
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kiln
