// Why kiln refuses an operator that it knows of but does not run, for the unsupported-node error.
#pragma once
#include <string>

namespace kiln::ir {

/// The reason and the way around it for (domain, op type), or "" when kiln has nothing to say.
std::string whyUnsupported(const std::string& domain, const std::string& opType);

}  // namespace kiln::ir
