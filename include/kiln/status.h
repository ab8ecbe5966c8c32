// Error values of kiln's build/run API (network, parser, builder, engine). Functions of that API
// return a Status or a Result<T>; they never throw. (Session, the ONNX Runtime-style API, throws
// kiln::Error instead.)
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "kiln/error.h"
#include "kiln/export.h"

namespace kiln {

class [[nodiscard]] KILN_API Status {
 public:
  Status() = default;  // success
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status success() { return Status(); }
  /// The status of a kiln::Error: its code and message.
  static Status fromError(const Error& error);

  bool ok() const { return code_ == ErrorCode::kSuccess; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_PLAN: model.kiln: plan is truncated ..." ("SUCCESS" when ok).
  std::string toString() const;

 private:
  ErrorCode code_ = ErrorCode::kSuccess;
  std::string message_;
};

/// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, like std::optional
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status(ErrorCode::kInternalError,
                       "a Result was made from a success Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }

  /// The value; calling these on a failed Result throws kiln::Error with the status message.
  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T&& value() && {
    check();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!value_)
      throw Error(ErrorCode::kInvalidArgument, "value() of a failed Result: " + status_.toString());
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace kiln
