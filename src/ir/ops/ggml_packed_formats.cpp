// Block sizes of the GGML formats (ggml-common.h's block_* structs: a float16 scale, then the
// quants; the 256-value "K" and IQ4_XS super-blocks add sub-block scales).
#include "ir/ops/ggml_packed_formats.h"

namespace kiln::ir {

const GgmlFormat* findGgmlFormat(int64_t packedType) {
  static const GgmlFormat kFormats[] = {
      {GgmlType::kF32, "F32", 1, 4, true},
      {GgmlType::kF16, "F16", 1, 2, true},
      {GgmlType::kBF16, "BF16", 1, 2, true},
      {GgmlType::kQ4_0, "Q4_0", 32, 18, true},
      {GgmlType::kQ5_0, "Q5_0", 32, 22, true},
      {GgmlType::kQ8_0, "Q8_0", 32, 34, true},
      {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18, true},
      {GgmlType::kQ5_K, "Q5_K", 256, 176, true},
      {GgmlType::kQ6_K, "Q6_K", 256, 210, true},
      {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136, true},
      {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
      {GgmlType::kIQ2_XS, "IQ2_XS", 256, 74, false},
      {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
      {GgmlType::kIQ2_S, "IQ2_S", 256, 82, false},
  };
  for (const GgmlFormat& f : kFormats)
    if (static_cast<int64_t>(f.type) == packedType) return &f;
  return nullptr;
}

}  // namespace kiln::ir
