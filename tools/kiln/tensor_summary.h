// Helpers the CLI uses to describe and create tensors.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "kiln/session.h"
#include "kiln/tensor.h"

namespace kiln::cli {

/// "name  float32[1x3x224x224]  min -1.2 max 3.4 mean 0.01".
std::string summarizeTensor(const std::string& name, const Tensor& t);
/// "1x3x?x?" with symbolic dims by name.
std::string describeInfoShape(const TensorInfo& info);
/// "float32[1x3x?x?]", "sequence<float32>", "optional<int64[2]>".
std::string describeInfoType(const TensorInfo& info);
/// Parses "1x3x224x224" (an empty string is a scalar).
Shape parseShape(const std::string& text);
/// Parses repeated "NAME:1x3x224x224" options.
std::map<std::string, Shape> parseShapeOptions(const std::vector<std::string>& options);
/// Seeded random values: floats uniform in [-1, 1), integers in [0, 10), random bools, digit
/// strings.
Tensor randomTensor(DataType dtype, const Shape& shape, uint64_t seed);
/// A file-system-safe version of a tensor name.
std::string sanitizeFileName(const std::string& name);

}  // namespace kiln::cli
