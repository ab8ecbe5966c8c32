#include "network_options.h"

#include <map>

#include "build/precision.h"
#include "commands.h"

namespace kiln::cli {

void markNetworkOutputs(NetworkDefinition& network, const std::vector<std::string>& names,
                        bool all) {
  std::map<std::string, ITensor*> tensors;
  for (int i = 0; i < network.getNbLayers(); ++i) {
    ILayer* layer = network.getLayer(i);
    for (int k = 0; k < layer->getNbOutputs(); ++k) {
      ITensor* t = layer->getOutput(k);
      if (!t) continue;
      tensors.emplace(t->getName(), t);
      if (all && !t->isNetworkOutput()) checkStatus(network.markOutput(*t));
    }
  }
  for (const std::string& name : names) {
    auto it = tensors.find(name);
    if (it == tensors.end())
      throw Error(ErrorCode::kInvalidArgument,
                  "--outputs: the model has no tensor named '" + name + "'");
    if (!it->second->isNetworkOutput()) checkStatus(network.markOutput(*it->second));
  }
}

void setLayerPrecisions(NetworkDefinition& network, const std::string& text) {
  for (const auto& [name, type] : build::parseLayerPrecisions(text)) {
    ILayer* layer = nullptr;
    for (int i = 0; i < network.getNbLayers() && !layer; ++i)
      if (network.getLayer(i)->getName() == name) layer = network.getLayer(i);
    if (!layer)
      throw Error(ErrorCode::kInvalidArgument,
                  "--layer-precisions: the model has no layer named '" + name + "'");
    layer->setPrecision(type);
  }
}

}  // namespace kiln::cli
