// Bool tensors read from bytes: a file's bool data (ONNX raw_data and external data, .npy, plans)
// may hold bytes other than 0 and 1, which a C++ bool may not (reading one is undefined), so the
// readers copy them through boolsFromBytes instead of viewing them.
#pragma once
#include <cstdint>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln {

/// A bool tensor of `shape` whose element i is bytes[i] != 0.
KILN_INTERNAL_API Tensor boolsFromBytes(Shape shape, const uint8_t* bytes);

}  // namespace kiln
