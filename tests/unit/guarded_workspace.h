// A kernel workspace of exactly the bytes a routine asked for, followed by a guard region: a
// routine that writes past what its *WorkspaceBytes function declared (the memory plan would give
// the next bytes to another tensor) changes the guard, and intact() says so.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/aligned_memory.h"

namespace kiln::testing {

class GuardedWorkspace {
 public:
  explicit GuardedWorkspace(uint64_t bytes)
      : bytes_(bytes), buffer_(static_cast<uint8_t*>(allocateAligned(bytes + kGuardBytes))) {
    // Filled with a NaN pattern too: a routine must not read scratch it has not written.
    std::memset(buffer_, 0xFF, bytes_ + kGuardBytes);
  }
  ~GuardedWorkspace() { std::free(buffer_); }
  GuardedWorkspace(const GuardedWorkspace&) = delete;
  GuardedWorkspace& operator=(const GuardedWorkspace&) = delete;

  /// The workspace (null when 0 bytes were asked for, as KernelContext::workspace gives).
  void* data() const { return bytes_ ? buffer_ : nullptr; }
  bool intact() const {
    for (uint64_t i = 0; i < kGuardBytes; ++i)
      if (buffer_[bytes_ + i] != 0xFF) return false;
    return true;
  }

 private:
  static constexpr uint64_t kGuardBytes = 4096;
  uint64_t bytes_;
  uint8_t* buffer_;
};

}  // namespace kiln::testing
