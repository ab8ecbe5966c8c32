// The GGML block formats of com.microsoft GatherPacked's packed_type (GGML's type ids, as
// onnxruntime 1.32 numbers them): how many values a block holds and how many bytes it takes.
// Shared by the shape rule (row bytes of K values) and the CPU decoder.
#pragma once
#include <cstdint>

namespace kiln::ir {

enum class GgmlType : int64_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ5_0 = 6,
  kQ8_0 = 8,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ4_NL = 20,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kBF16 = 30,
};

struct GgmlFormat {
  GgmlType type;
  const char* name;
  int64_t blockValues;
  int64_t blockBytes;
  // False for the IQ2 / IQ3 formats, which decode through lattice grids kiln does not carry.
  bool decoded;
};

/// The format of a packed_type onnxruntime's GatherPacked accepts; null for any other value.
const GgmlFormat* findGgmlFormat(int64_t packedType);

}  // namespace kiln::ir
