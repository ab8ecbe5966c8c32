// What may stop a run early: the caller's terminate flag (ONNX Runtime's RunOptions.terminate,
// set from another thread) and a cap on Loop iterations. The top-level run sets them for its
// thread with a RunControlScope (as ThreadPoolScope sets the pool); the executor checks the flag
// before every node, and Loop and Scan before every iteration, so nested bodies see it too.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include "core/internal_api.h"

namespace kiln::cpu {

struct RunControl {
  const std::atomic<bool>* terminate = nullptr;  // the run stops once it reads true
  int64_t maxLoopIterations = 0;                 // per Loop node per run; 0 = no cap
};

/// The control of the run on this thread (all defaults outside a scope).
const RunControl& currentRunControl();

/// Whether the caller has asked the run on this thread to stop.
inline bool terminateRequested() {
  const std::atomic<bool>* flag = currentRunControl().terminate;
  return flag && flag->load(std::memory_order_relaxed);
}

/// Throws kRuntimeError "run terminated (RunOptions.terminate was set) before <where>".
[[noreturn]] void throwTerminated(const std::string& where);

class KILN_INTERNAL_API RunControlScope {
 public:
  explicit RunControlScope(const RunControl& control);
  ~RunControlScope();
  RunControlScope(const RunControlScope&) = delete;
  RunControlScope& operator=(const RunControlScope&) = delete;

 private:
  const RunControl* previous_;
};

}  // namespace kiln::cpu
