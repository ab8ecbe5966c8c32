// The kiln CLI's subcommands. Each registers its options on the app and runs when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace kiln::cli {

/// A subcommand's action; returns the process exit code.
using Action = std::function<int()>;

Action addRunCommand(CLI::App& app);
Action addInspectCommand(CLI::App& app);
Action addOpsCommand(CLI::App& app);

/// Exit codes: 0 success, 1 error, 2 bad usage, 3 unsupported operator or type.
int exitCodeFor(const std::exception& e);

}  // namespace kiln::cli
