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

/// The most bytes one Tensor may allocate: physicalMemoryBytes(), unless lowered by
/// setTensorByteLimit. The fuzz targets (tests/fuzz) lower it so that an input asking for
/// gigabytes is refused at once, as on a small machine, instead of hitting the fuzzer's RSS limit.
uint64_t tensorByteLimit();
/// Sets tensorByteLimit (capped at physical memory); 0 restores the default.
void setTensorByteLimit(uint64_t bytes);

}  // namespace kiln
