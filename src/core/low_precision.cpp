#include "core/low_precision.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/error.h"

namespace kiln {
namespace {

// How a minifloat format spends its special encodings.
enum class Specials {
  kIeee,  // all-ones exponent: infinity (zero mantissa) or NaN (float8 E5M2)
  kFn,    // no infinity; only S.1111.111 is NaN (E4M3FN)
  kFnuz,  // no infinity, no negative zero; 0x80 is the only NaN (E4M3FNUZ, E5M2FNUZ)
  kNone,  // neither infinity nor NaN (float4 E2M1)
};

struct Minifloat {
  int exponentBits;
  int mantissaBits;
  int bias;
  Specials specials;
  double maxFinite;

  int signShift() const { return exponentBits + mantissaBits; }
  uint8_t signBit() const { return static_cast<uint8_t>(1u << signShift()); }
  uint8_t maxCode() const {  // the largest finite value, positive
    switch (specials) {
      case Specials::kIeee:  // the exponent below all ones, the mantissa all ones
        return static_cast<uint8_t>((((1u << exponentBits) - 2) << mantissaBits) |
                                    ((1u << mantissaBits) - 1));
      case Specials::kFn:
        return static_cast<uint8_t>(signBit() - 2);
      case Specials::kFnuz:
      case Specials::kNone:
        return static_cast<uint8_t>(signBit() - 1);
    }
    return 0;
  }
  uint8_t infinityCode(bool negative) const {  // kIeee only
    return static_cast<uint8_t>((negative ? signBit() : 0) |
                                (((1u << exponentBits) - 1) << mantissaBits));
  }
  uint8_t nanCode(bool negative) const {
    switch (specials) {
      // The quiet NaN ml_dtypes writes: the top mantissa bit set.
      case Specials::kIeee:
        return static_cast<uint8_t>(infinityCode(negative) | (1u << (mantissaBits - 1)));
      case Specials::kFn:
        return static_cast<uint8_t>((negative ? signBit() : 0) | (signBit() - 1));
      case Specials::kFnuz:
        return signBit();
      // float4 has no NaN. The ONNX reference (ml_dtypes) gives a zero whose sign is the NaN's
      // flipped; the conformance data expects exactly that, so it is kept bit for bit.
      case Specials::kNone:
        return negative ? 0 : signBit();
    }
    return 0;
  }
};

constexpr Minifloat kE4M3FN{4, 3, 7, Specials::kFn, 448.0};
constexpr Minifloat kE4M3FNUZ{4, 3, 8, Specials::kFnuz, 240.0};
constexpr Minifloat kE5M2{5, 2, 15, Specials::kIeee, 57344.0};
constexpr Minifloat kE5M2FNUZ{5, 2, 16, Specials::kFnuz, 57344.0};
constexpr Minifloat kE2M1{2, 1, 1, Specials::kNone, 6.0};

const Minifloat* minifloatOf(DataType type) {
  switch (type) {
    case DataType::kFloat8E4M3FN:
      return &kE4M3FN;
    case DataType::kFloat8E4M3FNUZ:
      return &kE4M3FNUZ;
    case DataType::kFloat8E5M2:
      return &kE5M2;
    case DataType::kFloat8E5M2FNUZ:
      return &kE5M2FNUZ;
    case DataType::kFloat4E2M1:
      return &kE2M1;
    default:
      return nullptr;
  }
}

float decodeMinifloat(const Minifloat& f, uint8_t bits) {
  bits &= static_cast<uint8_t>((f.signBit() << 1) - 1);
  const bool negative = (bits & f.signBit()) != 0;
  const unsigned exponent = (bits >> f.mantissaBits) & ((1u << f.exponentBits) - 1);
  const unsigned mantissa = bits & ((1u << f.mantissaBits) - 1);
  const unsigned allOnes = (1u << f.exponentBits) - 1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (f.specials) {
    case Specials::kIeee:
      if (exponent == allOnes) {
        if (mantissa) return negative ? -nan : nan;
        return negative ? -std::numeric_limits<float>::infinity()
                        : std::numeric_limits<float>::infinity();
      }
      break;
    case Specials::kFn:
      if (exponent == allOnes && mantissa == (1u << f.mantissaBits) - 1)
        return negative ? -nan : nan;
      break;
    case Specials::kFnuz:
      if (bits == f.signBit()) return nan;
      break;
    case Specials::kNone:
      break;
  }
  // Subnormals (exponent 0) have no implicit leading 1 and the exponent of the smallest normal.
  const int e = exponent == 0 ? 1 - f.bias : static_cast<int>(exponent) - f.bias;
  const unsigned significand = exponent == 0 ? mantissa : mantissa | (1u << f.mantissaBits);
  const float magnitude = std::ldexp(static_cast<float>(significand), e - f.mantissaBits);
  return negative ? -magnitude : magnitude;
}

uint8_t encodeMinifloat(const Minifloat& f, double v, bool saturate) {
  const bool negative = std::signbit(v);
  if (std::isnan(v)) return f.nanCode(negative);
  const uint8_t sign = negative ? f.signBit() : 0;
  const bool saturates = saturate || f.specials == Specials::kNone;
  // Out of range: the largest finite value, infinity, or NaN where the format has no infinity.
  auto overflow = [&]() -> uint8_t {
    if (saturates) return static_cast<uint8_t>(sign | f.maxCode());
    return f.specials == Specials::kIeee ? f.infinityCode(negative) : f.nanCode(negative);
  };
  const double a = std::fabs(v);
  if (std::isinf(a)) return overflow();
  const int minExponent = 1 - f.bias;
  // Round to a multiple of the quantum of a's binade (subnormals share the smallest normal's).
  // Dividing by a power of two is exact in double, and nearbyint rounds half to even.
  int binade = 0;
  if (a != 0) {
    std::frexp(a, &binade);
    binade -= 1;  // a = 1.xxx * 2^binade
  }
  const int quantumExponent = std::max(binade, minExponent) - f.mantissaBits;
  const double units = std::nearbyint(std::ldexp(a, -quantumExponent));
  const double rounded = std::ldexp(units, quantumExponent);
  if (rounded > f.maxFinite) return overflow();
  if (rounded == 0) return f.specials == Specials::kFnuz ? 0 : sign;
  int roundedBinade = 0;
  std::frexp(rounded, &roundedBinade);
  roundedBinade -= 1;
  if (roundedBinade <
      minExponent) {  // subnormal: the units of the smallest binade are the mantissa
    return static_cast<uint8_t>(
        sign | static_cast<unsigned>(std::ldexp(rounded, f.mantissaBits - minExponent)));
  }
  const unsigned significand =
      static_cast<unsigned>(std::ldexp(rounded, f.mantissaBits - roundedBinade));
  const unsigned exponentField = static_cast<unsigned>(roundedBinade + f.bias);
  return static_cast<uint8_t>(sign | (exponentField << f.mantissaBits) |
                              (significand & ((1u << f.mantissaBits) - 1)));
}

// float8e8m0: an unsigned power of two 2^(bits - 127); 0xFF is NaN. Follows the ONNX reference
// (numpy_helper.to_float8e8m0): the value is rounded to float32 and its exponent field rounded.
uint8_t encodeE8M0(double v, const LowPrecisionOptions& options) {
  const float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t exponent = (bits >> 23) & 0xFF;
  if (exponent == 0xFF) return 0xFF;  // NaN and infinities
  bool roundUp = false;
  switch (options.e8m0Rounding) {
    case E8M0Rounding::kUp:
      roundUp = (bits & 0x7FFFFF) != 0;
      break;
    case E8M0Rounding::kDown:
      break;
    case E8M0Rounding::kNearest: {
      // Guard bit set, and any bit below it or a normal value (whose mantissa starts at 1.5).
      const bool guard = (bits & 0x400000) != 0;
      const bool rest = (bits & 0x3FFFFF) != 0;
      roundUp = guard && (rest || exponent > 0);
      break;
    }
  }
  if (roundUp && options.saturate && exponent == 0xFE)
    roundUp = false;                                          // stay at the largest value
  return static_cast<uint8_t>(exponent + (roundUp ? 1 : 0));  // 0xFE + 1 is NaN
}

float decodeE8M0(uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

// Bits of int4 / uint4 / int2 / uint2 and whether they are signed.
int integerBits(DataType type, bool* isSigned) {
  switch (type) {
    case DataType::kInt4:
      *isSigned = true;
      return 4;
    case DataType::kUint4:
      *isSigned = false;
      return 4;
    case DataType::kInt2:
      *isSigned = true;
      return 2;
    case DataType::kUint2:
      *isSigned = false;
      return 2;
    default:
      return 0;
  }
}

[[noreturn]] void notLowPrecision(DataType type, const char* what) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string(what) + ": " + dataTypeName(type) + " is not a low-precision type");
}

}  // namespace

bool parseE8M0Rounding(const std::string& text, E8M0Rounding* out) {
  if (text == "up")
    *out = E8M0Rounding::kUp;
  else if (text == "down")
    *out = E8M0Rounding::kDown;
  else if (text == "nearest")
    *out = E8M0Rounding::kNearest;
  else
    return false;
  return true;
}

float lowPrecisionToFloat(DataType type, uint8_t bits) {
  if (const Minifloat* f = minifloatOf(type)) return decodeMinifloat(*f, bits);
  if (type == DataType::kFloat8E8M0) return decodeE8M0(bits);
  bool isSigned = false;
  const int width = integerBits(type, &isSigned);
  if (!width) notLowPrecision(type, "lowPrecisionToFloat");
  const int mask = (1 << width) - 1;
  const int code = bits & mask;
  const int signBit = 1 << (width - 1);
  return static_cast<float>(isSigned ? (code ^ signBit) - signBit : code);
}

uint8_t floatToLowPrecision(DataType type, double v, const LowPrecisionOptions& options) {
  if (const Minifloat* f = minifloatOf(type)) return encodeMinifloat(*f, v, options.saturate);
  if (type == DataType::kFloat8E8M0) return encodeE8M0(v, options);
  bool isSigned = false;
  if (!integerBits(type, &isSigned)) notLowPrecision(type, "floatToLowPrecision");
  const double t = std::trunc(v);
  // Beyond int64 (and NaN) the conversion is undefined in C++; ml_dtypes gives 0 there.
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) return 0;
  return integerToLowPrecision(type, static_cast<int64_t>(t), options);
}

uint8_t integerToLowPrecision(DataType type, int64_t v, const LowPrecisionOptions& options) {
  bool isSigned = false;
  const int width = integerBits(type, &isSigned);
  if (width) return static_cast<uint8_t>(static_cast<uint64_t>(v) & ((1u << width) - 1));
  return floatToLowPrecision(type, static_cast<double>(v), options);
}

std::pair<int64_t, int64_t> lowPrecisionIntegerRange(DataType type) {
  bool isSigned = false;
  const int width = integerBits(type, &isSigned);
  if (!width) notLowPrecision(type, "lowPrecisionIntegerRange");
  if (isSigned) return {-(int64_t{1} << (width - 1)), (int64_t{1} << (width - 1)) - 1};
  return {0, (int64_t{1} << width) - 1};
}

int packedElementsPerByte(DataType type) {
  switch (type) {
    case DataType::kInt4:
    case DataType::kUint4:
    case DataType::kFloat4E2M1:
      return 2;
    case DataType::kInt2:
    case DataType::kUint2:
      return 4;
    default:
      return 1;
  }
}

size_t packedByteCount(DataType type, int64_t numel) {
  const int64_t perByte = packedElementsPerByte(type);
  return static_cast<size_t>(numel / perByte +
                             (numel % perByte != 0));  // no overflow near INT64_MAX
}

void unpackLowPrecision(DataType type, const uint8_t* packed, int64_t numel, uint8_t* out) {
  const int perByte = packedElementsPerByte(type);
  const int width = 8 / perByte;
  const unsigned mask = (1u << width) - 1;
  for (int64_t i = 0; i < numel; ++i) {
    const unsigned shift = static_cast<unsigned>((i % perByte) * width);
    out[i] = static_cast<uint8_t>((packed[i / perByte] >> shift) & mask);
  }
}

std::string packLowPrecision(DataType type, const uint8_t* values, int64_t numel) {
  const int perByte = packedElementsPerByte(type);
  const int width = 8 / perByte;
  const unsigned mask = width == 8 ? 0xFFu : (1u << width) - 1;
  std::string out(packedByteCount(type, numel), '\0');
  for (int64_t i = 0; i < numel; ++i) {
    const unsigned shift = static_cast<unsigned>((i % perByte) * width);
    out[static_cast<size_t>(i / perByte)] =
        static_cast<char>(static_cast<uint8_t>(out[static_cast<size_t>(i / perByte)]) |
                          ((values[i] & mask) << shift));
  }
  return out;
}

}  // namespace kiln
