// kiln: build, run and inspect ONNX models.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "commands.h"
#include "kiln/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning inference engine for ONNX models"};
  app.require_subcommand(1);
  std::map<CLI::App*, kiln::cli::Action> actions;
  auto add = [&](kiln::cli::Action action) {
    actions[app.get_subcommands({}).back()] = std::move(action);
  };
  add(kiln::cli::addRunCommand(app));
  add(kiln::cli::addInspectCommand(app));
  add(kiln::cli::addOpsCommand(app));
  add(kiln::cli::addBenchCommand(app));
  add(kiln::cli::addBuildCommand(app));
  add(kiln::cli::addQuantizeCommand(app));
  add(kiln::cli::addCompareCommand(app));
  add(kiln::cli::addServeCommand(app));
  add(kiln::cli::addCheckCommand(app));
  add(kiln::cli::addExtractCommand(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    try {
      return action();
    } catch (const std::exception& e) {
      std::cerr << "kiln " << sub->get_name() << ": error: " << kiln::cli::printable(e.what())
                << "\n";
      return kiln::cli::exitCodeFor(e);
    }
  }
  return 2;
}

namespace kiln::cli {

std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

int exitCodeFor(const std::exception& e) {
  auto* err = dynamic_cast<const Error*>(&e);
  if (err && err->code() == ErrorCode::kUnsupportedNode) return 3;
  return 1;
}

}  // namespace kiln::cli
