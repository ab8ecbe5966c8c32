// Reading and writing numpy .npy files (format versions 1-3, little-endian, C order).
#pragma once
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

/// Reads an .npy file. Supports bool, int8..int64, uint8..uint64, float16/32/64 and unicode
/// strings ('<U'); errors name the file and what is wrong.
KILN_API Tensor readNpy(const std::string& path);
/// The same from a stream positioned at the file's start (an .npz entry); `path` names it in
/// errors.
KILN_API Tensor readNpy(std::istream& in, const std::string& path);
/// Reads an .npz file (numpy.savez / savez_compressed: a zip of .npy files, stored or deflated):
/// the arrays in the archive's order, named by their entry without ".npy".
KILN_API std::vector<std::pair<std::string, Tensor>> readNpz(const std::string& path);
/// The same from the archive's bytes in memory; `path` names it in errors.
KILN_API std::vector<std::pair<std::string, Tensor>> readNpzBytes(const std::string& bytes,
                                                                  const std::string& path);
/// Writes an .npy file (bfloat16 is written as float32, which numpy cannot hold natively).
KILN_API void writeNpy(const std::string& path, const Tensor& tensor);

}  // namespace kiln
