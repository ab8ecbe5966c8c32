// Plugin libraries (C++ plugins, include/kiln/plugin.h) from Python.
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "errors.h"
#include "kiln/plugin.h"

namespace kiln::python {

void bindPlugins(nb::module_& m) {
  m.def(
      "load_plugin_library",
      [](const std::string& path) {
        Status status = loadPluginLibrary(path);
        if (!status.ok()) throw OrtError(OrtCode::kFail, status.message());
      },
      nb::arg("path"),
      "Loads a kiln plugin library (.so); its plugins then serve the ops they name.");
}

}  // namespace kiln::python
