// Checks of a kernel's tensors while it runs that fail through its KernelContext (which names the
// node), with the messages of the ir shape helpers the same checks use at build time.
#pragma once
#include <cstdint>

#include "backends/cpu/kernel.h"

namespace kiln::cpu {

/// A possibly negative axis in [0, rank); fails if it is out of range.
int64_t normalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank);
/// Numpy-style broadcast of two concrete shapes; fails (kInvalidArgument) when they do not
/// broadcast.
Shape broadcastShapes(const KernelContext& ctx, const Shape& a, const Shape& b);

}  // namespace kiln::cpu
