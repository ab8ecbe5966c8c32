// Limits every layer applies to tensors it is told about (models, plans, inputs), so that a
// nonsensical declaration fails with a message instead of an allocation the size of its claim.
#pragma once
#include <cstddef>

namespace kiln {

/// The most dimensions a kiln tensor may have (numpy's limit too).
constexpr size_t kMaxTensorRank = 64;

}  // namespace kiln
