// Limits every layer applies to tensors it is told about (models, plans, inputs), so that a
// nonsensical declaration fails with a message instead of an allocation the size of its claim.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln {

/// The most dimensions a kiln tensor may have (numpy's limit too).
constexpr size_t kMaxTensorRank = 64;

/// This machine's physical memory in bytes: no single tensor may need more.
uint64_t physicalMemoryBytes();

}  // namespace kiln
