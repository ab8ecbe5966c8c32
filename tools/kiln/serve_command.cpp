// kiln serve MODEL_REPOSITORY [--http-port 8000] [--threads N] [--instances N] ...: the KServe v2 /
// Triton HTTP server. It lives in the Python package (kiln.serve, on Starlette and uvicorn), so
// this command hands its arguments to `python -m kiln.serve`: the Python named by $KILN_PYTHON,
// else python3 from PATH. docs/serving.md describes the server.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "commands.h"

namespace kiln::cli {

namespace {

// Run by the Python: a missing package becomes one line that says what to install.
constexpr const char* kBootstrap = R"(import sys
try:
    import kiln.serve.app, uvicorn
    from kiln.serve.__main__ import main
except ModuleNotFoundError as e:
    sys.exit(f"kiln serve: {sys.executable} cannot import {e.name}: install the kiln Python package with its "
             f"serving dependencies (pip install '/path/to/kiln[serve]'), or set KILN_PYTHON to a Python that has them")
sys.exit(main(sys.argv[1:]))
)";

int execPython(const std::vector<std::string>& args) {
  const char* env = std::getenv("KILN_PYTHON");
  const std::string python = env && *env ? env : "python3";
  std::vector<std::string> argv = {python, "-c", kBootstrap};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::cout.flush();
  execvp(python.c_str(), cargv.data());
  std::cerr << "kiln serve: error: cannot run '" << python << "' ("
            << (env && *env ? "$KILN_PYTHON" : "python3 from PATH") << "): " << std::strerror(errno)
            << "\n";
  return 1;
}

}  // namespace

Action addServeCommand(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("serve",
                         "Serve a model repository over HTTP (KServe v2 / Triton protocol); "
                         "runs python -m kiln.serve, see 'kiln serve --help'");
  cmd->prefix_command();  // every argument, --help included, goes to the Python server unparsed
  cmd->set_help_flag();
  return [cmd] { return execPython(cmd->remaining()); };
}

}  // namespace kiln::cli
