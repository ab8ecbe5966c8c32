#include "backends/cpu/run_control.h"

#include "kiln/error.h"

namespace kiln::cpu {
namespace {

const RunControl kNoControl;
thread_local const RunControl* current = &kNoControl;

}  // namespace

const RunControl& currentRunControl() { return *current; }

void throwTerminated(const std::string& where) {
  throw Error(ErrorCode::kRuntimeError,
              "run terminated (RunOptions.terminate was set) before " + where);
}

RunControlScope::RunControlScope(const RunControl& control) : previous_(current) {
  current = &control;
}
RunControlScope::~RunControlScope() { current = previous_; }

}  // namespace kiln::cpu
