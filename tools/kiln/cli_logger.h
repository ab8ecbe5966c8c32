// The CLI's logger. Warnings go to stderr; errors do not, since every error also comes back as a
// Status or exception that main() prints once (one line per failure). With `verbose`, verbose
// messages (each layer's build decisions) are kept for the command to print.
#pragma once
#include <iostream>
#include <string>
#include <vector>

#include "kiln/logger.h"

namespace kiln::cli {

class CliLogger : public ILogger {
 public:
  explicit CliLogger(bool verbose = false) : verbose_(verbose) {}
  void log(Severity severity, const std::string& message) noexcept override {
    if (severity == Severity::kWARNING) std::cerr << "warning: " << message << "\n";
    if (severity == Severity::kVERBOSE && verbose_) {
      try {
        decisions.push_back(message);
      } catch (...) {
      }
    }
  }
  std::vector<std::string> decisions;

 private:
  bool verbose_;
};

}  // namespace kiln::cli
