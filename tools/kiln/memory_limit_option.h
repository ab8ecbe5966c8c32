// The --memory-limit option of kiln run and kiln build (docs/cli.md, docs/reliability.md).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace kiln::cli {

/// What --memory-limit holds until it is given: the default allocation limit stays in force.
constexpr double kMemoryLimitNotGiven = -1;

/// Adds `--memory-limit MiB` to `cmd`, stored in `mib` (set to kMemoryLimitNotGiven first).
/// `what` says what the limit bounds, for the help text.
void addMemoryLimitOption(CLI::App* cmd, double* mib, const std::string& what);

/// The allocation limit in bytes for SessionOptions / BuilderConfig: 0 (the default, 90 % of
/// this machine's memory) when the option was not given, this machine's physical memory for
/// `--memory-limit 0`, else MiB * 2^20.
uint64_t memoryLimitBytes(double mib);

}  // namespace kiln::cli
