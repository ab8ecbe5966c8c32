// The kiln CLI's subcommands. Each registers its options on the app and runs when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "kiln/engine.h"
#include "kiln/error.h"
#include "kiln/status.h"

namespace kiln::cli {

/// A subcommand's action; returns the process exit code.
using Action = std::function<int()>;

Action addRunCommand(CLI::App& app);
Action addInspectCommand(CLI::App& app);
Action addOpsCommand(CLI::App& app);
Action addBenchCommand(CLI::App& app);
Action addBuildCommand(CLI::App& app);
Action addQuantizeCommand(CLI::App& app);
Action addCompareCommand(CLI::App& app);
Action addServeCommand(CLI::App& app);
Action addCheckCommand(CLI::App& app);
Action addExtractCommand(CLI::App& app);

/// The text with control bytes (names read from a model may hold any) shown as \xNN, so that an
/// error stays one readable line.
std::string printable(const std::string& text);

/// Exit codes: 0 success, 1 error, 2 bad usage, 3 unsupported operator or type.
int exitCodeFor(const std::exception& e);

/// The kiln::Error for a failed Status (so that exit codes follow the error kind).
Error errorFromStatus(const Status& status);
/// Throws errorFromStatus(status) when it failed.
inline void checkStatus(const Status& status) {
  if (!status.ok()) throw errorFromStatus(status);
}
/// True when the file starts with the plan magic ("KILNPLAN").
bool isPlanFile(const std::string& path);
/// Loads a plan file; throws kiln::Error on failure.
std::shared_ptr<const Engine> loadPlanFile(const std::string& path, ILogger& logger);

}  // namespace kiln::cli
