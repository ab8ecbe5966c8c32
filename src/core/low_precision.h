// Conversions of ONNX's low-precision element types (float8 E4M3FN / E4M3FNUZ / E5M2 / E5M2FNUZ /
// E8M0, float4 E2M1, int4, uint4, int2, uint2) to and from wider values, and the packing ONNX
// files use for the 4-bit and 2-bit types.
//
// A kiln tensor stores these types unpacked, one byte per element, with the format's bit pattern
// in the low bits (int4 -1 is 0x0F), as ml_dtypes does. Decoding ignores the unused high bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/internal_api.h"
#include "kiln/dtype.h"

namespace kiln {

/// Cast's `round_mode` for float8e8m0 targets: away from zero, toward zero, or to the nearer
/// power of two (ties up).
enum class E8M0Rounding { kUp, kDown, kNearest };

/// How floatToLowPrecision treats values out of range.
struct LowPrecisionOptions {
  /// Cast's / QuantizeLinear's `saturate` (float8 targets): out-of-range values and infinities
  /// become the largest finite value instead of infinity or NaN.
  bool saturate = true;
  E8M0Rounding e8m0Rounding = E8M0Rounding::kUp;
};

/// Parses Cast's round_mode attribute ("up", "down", "nearest"); false for other text.
bool parseE8M0Rounding(const std::string& text, E8M0Rounding* out);

/// The exact value of one stored element of a low-precision type.
KILN_INTERNAL_API float lowPrecisionToFloat(DataType type, uint8_t bits);

/// Encodes v as a Cast to `type` does (the ONNX reference, which uses ml_dtypes):
/// - float8 and float4: round to nearest even; out-of-range values and infinities per `saturate`
///   (float4 always saturates, having no infinity or NaN);
/// - float8e8m0: v is first rounded to float32, then its exponent rounded per e8m0Rounding;
/// - int4 / uint4 / int2 / uint2: truncated toward zero, then wrapped to the low bits as integer
///   casts do (NaN, infinities and values beyond int64 give 0).
KILN_INTERNAL_API uint8_t floatToLowPrecision(DataType type, double v,
                                              const LowPrecisionOptions& options = {});

/// An integer in int4 / uint4 / int2 / uint2: its low bits, two's complement (Cast's wrapping).
/// For the float types, the value rounded as floatToLowPrecision does.
KILN_INTERNAL_API uint8_t integerToLowPrecision(DataType type, int64_t v,
                                                const LowPrecisionOptions& options = {});

/// [lowest, highest] of int4, uint4, int2 or uint2.
KILN_INTERNAL_API std::pair<int64_t, int64_t> lowPrecisionIntegerRange(DataType type);

/// Elements per byte in an ONNX file: 2 for int4 / uint4 / float4, 4 for int2 / uint2, else 1.
KILN_INTERNAL_API int packedElementsPerByte(DataType type);
/// Bytes `numel` elements take when packed.
KILN_INTERNAL_API size_t packedByteCount(DataType type, int64_t numel);
/// Unpacks `numel` elements (first element in the lowest bits) to one byte each.
KILN_INTERNAL_API void unpackLowPrecision(DataType type, const uint8_t* packed, int64_t numel,
                                          uint8_t* out);
/// Packs `numel` one-byte elements; unused bits of the last byte are zero.
KILN_INTERNAL_API std::string packLowPrecision(DataType type, const uint8_t* values, int64_t numel);

}  // namespace kiln
