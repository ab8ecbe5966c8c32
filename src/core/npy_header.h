// The header of a .npy file: a Python dict literal with exactly the keys 'descr' (a string),
// 'fortran_order' (True or False) and 'shape' (a tuple of non-negative ints), as numpy writes it
// and as numpy.lib.format requires when reading.
#pragma once
#include <string>

#include "core/internal_api.h"
#include "kiln/tensor.h"

namespace kiln {

struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  Shape shape;
};

/// Parses the header text (padding spaces and the final newline included); throws kiln::Error
/// (kInvalidArgument) naming `path` and what is malformed.
KILN_INTERNAL_API NpyHeader parseNpyHeader(const std::string& text, const std::string& path);

}  // namespace kiln
