// kiln.IPluginV2: a plugin made by a registered creator, ready to be added to a network.
#pragma once
#include <memory>
#include <string>

#include "kiln/plugin.h"

namespace kiln::python {

struct PluginHandle {
  std::shared_ptr<const IPlugin> plugin;
  std::string name;  // the layer name it was made for
};

}  // namespace kiln::python
