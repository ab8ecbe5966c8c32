// The node string attribute that pins a node's precision, set from a layer's setPrecision
// (with BuilderFlag::kOBEY_PRECISION_CONSTRAINTS): "fp32", "bf16", "fp16" or "int8".
#pragma once

namespace kiln::ir {

inline constexpr const char* kPrecisionAttr = "kiln_precision";
inline constexpr const char* kPrecisionFp32 = "fp32";

}  // namespace kiln::ir
