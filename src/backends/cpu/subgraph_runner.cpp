#include "backends/cpu/subgraph_runner.h"

#include <string>

#include "ir/node_attrs.h"

namespace kiln::cpu {

std::shared_ptr<const SubgraphRunner> makeBodyRunner(const KernelCreateInfo& info,
                                                     const char* attribute) {
  if (!info.subgraphs) {
    ir::failNode(
        info.node,
        std::string("cannot run its '") + attribute +
            "' body: the kernel was created without a subgraph runner factory (internal error)",
        ErrorCode::kRuntimeError);
  }
  return info.subgraphs->makeRunner(ir::attrGraph(info.node, attribute));
}

}  // namespace kiln::cpu
