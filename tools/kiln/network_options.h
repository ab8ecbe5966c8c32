// What the CLI changes in a parsed network by name: intermediate tensors marked as outputs (`kiln
// build --outputs / --mark-all`) and per-layer precisions (`--layer-precisions`), for kiln build
// and kiln compare's in-memory builds.
#pragma once
#include <string>
#include <vector>

#include "kiln/network.h"

namespace kiln::cli {

/// Marks the tensors named (and, with `all`, every layer's outputs, in layer order) as network
/// outputs; throws naming a tensor no layer computes.
void markNetworkOutputs(NetworkDefinition& network, const std::vector<std::string>& names,
                        bool all);

/// Sets each layer's precision from trtexec's --layerPrecisions text ("name:fp32,other:bf16");
/// throws naming an entry that does not parse or a layer the network lacks.
void setLayerPrecisions(NetworkDefinition& network, const std::string& text);

}  // namespace kiln::cli
