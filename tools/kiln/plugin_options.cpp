#include "plugin_options.h"

#include "commands.h"
#include "kiln/plugin.h"

namespace kiln::cli {

void addPluginOption(CLI::App& cmd, std::vector<std::string>& libraries) {
  cmd.add_option("--plugins", libraries, "LIB.so: load a plugin library first (repeatable)");
}

void loadPlugins(const std::vector<std::string>& libraries) {
  for (const std::string& lib : libraries) {
    Status s = loadPluginLibrary(lib);
    if (!s.ok()) throw errorFromStatus(s);
  }
}

}  // namespace kiln::cli
