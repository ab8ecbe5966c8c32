// What every fuzz target shares: the contract that bad input is refused with a kiln::Error (any
// other exception escapes to libFuzzer, which reports it as a crash), a logger that keeps quiet,
// and a reader of little-endian fields from the fuzzer's bytes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/tensor_limits.h"
#include "kiln/error.h"
#include "kiln/logger.h"
#include "kiln/status.h"

namespace kiln::fuzz {

/// Runs `work`; a kiln::Error is the expected way to refuse an input. std::bad_alloc, out_of_range
/// and friends are not caught: an input that raises them found a missing check.
template <class Work>
void refusedOnlyByKilnErrors(Work&& work) {
  try {
    work();
  } catch (const kiln::Error&) {
  }
}

/// A Status from the status-returning API is a refusal too, unless it hides what guardStatus
/// (engine/api_guard.h) caught: another exception (kINTERNAL_ERROR) or a std::bad_alloc.
inline void refusedOnlyByKilnErrors(const Status& status) {
  const bool badAlloc =
      status.code() == ErrorCode::kOutOfMemory && status.message() == "out of memory";
  if (status.code() == ErrorCode::kInternalError || badAlloc) {
    std::fprintf(stderr, "kiln fuzz: not a kiln::Error: %s\n", status.toString().c_str());
    std::abort();
  }
}

/// The most bytes a tensor may take in a fuzz run: a larger one is refused with a kiln::Error, as
/// on a machine with that much memory, so that the fuzzer's RSS limit (scripts/fuzz) is left for
/// allocations kiln makes without checking.
inline constexpr uint64_t kFuzzTensorByteLimit = uint64_t{256} << 20;

/// Called first by each target's LLVMFuzzerInitialize, with the largest tensor it may allocate.
// The allocation limit holds on the thread that opens the scope: LLVMFuzzerInitialize runs on the
// thread that then runs every input, and session_run runs its sessions on one thread.
inline void setUpFuzzing(uint64_t tensorByteLimit = kFuzzTensorByteLimit) {
  static AllocationLimitScope limit(tensorByteLimit);
}

/// Drops every message: the fuzzer's output stays its own.
class SilentLogger : public ILogger {
 public:
  void log(Severity, const std::string&) noexcept override {}
};

/// Reads the fuzzer's bytes front to back; past the end every read gives zeros.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  /// The rest of the bytes.
  const uint8_t* rest() const { return data_ + pos_; }
  size_t remaining() const { return size_ - pos_; }
  /// Copies up to `n` bytes into `out` (zero-filling the rest of it).
  void fill(void* out, size_t n) {
    const size_t take = std::min(n, remaining());
    std::memcpy(out, data_ + pos_, take);
    std::memset(static_cast<uint8_t*>(out) + take, 0, n - take);
    pos_ += take;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kiln::fuzz
