// Decoders of GGML block-packed rows (the layouts of ggml-common.h's block_* structs) into
// float32, for com.microsoft GatherPacked. Each multiplies in GGML's order, so that the float32
// values are the ones GGML and onnxruntime produce.
#pragma once
#include <cstdint>

#include "ir/ops/ggml_packed_formats.h"

namespace kiln::cpu {

/// Decodes one row of `values` values (a multiple of the format's block size) packed in `format`
/// (one of those with `decoded` set) from `row` into `out`.
void decodeGgmlRow(ir::GgmlType format, const uint8_t* row, int64_t values, float* out);

}  // namespace kiln::cpu
