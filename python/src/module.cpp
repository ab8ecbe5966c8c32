// kiln._kiln: the compiled half of the kiln Python package (python/kiln is the other).
#include "bindings.h"

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's compiled bindings; use the kiln package, which wraps them.";
  m.attr("__version__") = KILN_VERSION;
  kiln::python::bindErrors(m);
  kiln::python::bindTensors(m);
  kiln::python::bindSession(m);
  kiln::python::bindPlugins(m);
  kiln::python::bindTrtPlugins(m);  // before the network: add_plugin_v2 takes its IPluginV2
  kiln::python::bindTrtNetwork(m);
  kiln::python::bindTrtTimingCache(m);  // before the builder config, which makes and takes caches
  kiln::python::bindTrtBuilder(m);
  kiln::python::bindTrtParser(m);
  kiln::python::bindTrtRuntime(m);
  kiln::python::bindCustomOps(m);
}
