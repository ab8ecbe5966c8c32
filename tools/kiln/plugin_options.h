// --plugins LIB.so (repeatable): plugin libraries loaded before a model or plan is opened.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

void addPluginOption(CLI::App& cmd, std::vector<std::string>& libraries);
/// Loads each library (kiln::loadPluginLibrary); throws kiln::Error naming the one that fails.
void loadPlugins(const std::vector<std::string>& libraries);

}  // namespace kiln::cli
