// CPU kernels for Cast and CastLike: numeric conversions as numpy's astype does them (16-bit
// floats round to nearest even), and string <-> number conversions in numpy's text formats.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/kernels/cast_low_precision.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

// ---- Numbers to text, as numpy's str() writes them ----

// Lays out the shortest round-trip digits of a float the way numpy's str() does: scientific
// ("1e-05") when `scientificLayout`, else positional with a fractional part ("1.0").
// `scientific` is std::to_chars' scientific form ("1.2345e+02").
std::string numpyLayout(const std::string& scientific, bool scientificLayout) {
  const size_t e = scientific.find('e');
  std::string mantissa = scientific.substr(0, e);
  const int exponent = std::atoi(scientific.c_str() + e + 1);
  std::string sign;
  if (!mantissa.empty() && mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (digits.find_first_not_of('0') == std::string::npos) return sign + "0.0";
  if (scientificLayout) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int absExp = std::abs(exponent);
    out += exponent < 0 ? "e-" : "e+";
    if (absExp < 10) out += "0";
    return out + std::to_string(absExp);
  }
  if (exponent < 0)
    return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t intDigits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= intDigits)
    return sign + digits + std::string(intDigits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, intDigits) + "." + digits.substr(intDigits);
}

template <typename F>
std::string shortestScientific(F v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  return std::string(buf, res.ptr);
}

// Shortest digits that round-trip through the 16-bit type T.
template <typename T>
std::string shortestScientific16(T v) {
  const float f = static_cast<float>(v);
  char buf[64];
  for (int precision = 0; precision < 9; ++precision) {
    auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific, precision);
    std::string text(buf, res.ptr);
    if (T(std::strtof(text.c_str(), nullptr)).bits == v.bits) return text;
  }
  return shortestScientific(f);
}

// numpy writes |x| >= 10^digits of the type in scientific notation: 1e3 for the 16-bit floats,
// 1e6 for float32, 1e16 for float64; and |x| < 1e-4 for every type.
template <typename T>
constexpr double kPositionalLimit = std::is_same_v<T, double>
                                        ? 1e16
                                        : (std::is_same_v<T, float> ? 1e6 : 1e3);

template <typename T>
std::string numberToString(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    const auto c = static_cast<ComputeType<T>>(v);
    if (std::isnan(c)) return "nan";
    if (std::isinf(c)) return c > 0 ? "inf" : "-inf";
    const double magnitude = std::fabs(static_cast<double>(c));
    const bool scientific =
        magnitude != 0 && (magnitude < 1e-4 || magnitude >= kPositionalLimit<T>);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return numpyLayout(shortestScientific16(v), scientific);
    } else {
      return numpyLayout(shortestScientific(v), scientific);
    }
  }
}

// ---- Text to numbers ----

bool onlySpacesFrom(const char* p) {
  while (*p == ' ' || *p == '\t' || *p == '\n') ++p;
  return *p == '\0';
}

// Parses plain and scientific notation, "inf"/"INF"/"+INF" and "nan" like numpy; returns false
// for text that is not a number.
template <typename T>
bool parseNumber(const std::string& text, T& out) {
  const char* begin = text.c_str();
  char* end = nullptr;
  if constexpr (std::is_same_v<T, bool>) {
    if (text == "True" || text == "true" || text == "False" || text == "false") {
      out = text[0] == 'T' || text[0] == 't';
      return true;
    }
    const double d = std::strtod(begin, &end);
    out = d != 0.0;
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    out = static_cast<T>(std::strtoll(begin, &end, 10));
  } else if constexpr (std::is_integral_v<T>) {
    out = static_cast<T>(std::strtoull(begin, &end, 10));
  } else {
    out = convertNumber<T>(std::strtod(begin, &end));
  }
  return end != begin && onlySpacesFrom(end);
}

void castKernel(KernelContext& ctx, const LowPrecisionOptions& options) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.numel();
  const DataType from = x.dtype();
  const DataType to = y.dtype();
  if (from == DataType::kString && to == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) y.data<std::string>()[i] = x.data<std::string>()[i];
  } else if (from == to) {
    if (n) std::memcpy(y.raw(), x.raw(), x.byteSize());
  } else if ((isLowPrecision(from) || isLowPrecision(to)) && from != DataType::kString &&
             to != DataType::kString) {
    castLowPrecision(x, y, options);
  } else if (to == DataType::kString) {
    dispatchNumericOrBool(from, "Cast", [&](auto tag) {
      using From = typename decltype(tag)::type;
      const From* src = x.data<From>();
      std::string* dst = y.data<std::string>();
      for (int64_t i = 0; i < n; ++i) dst[i] = numberToString(src[i]);
    });
  } else if (from == DataType::kString) {
    dispatchNumericOrBool(to, "Cast", [&](auto tag) {
      using To = typename decltype(tag)::type;
      const std::string* src = x.data<std::string>();
      To* dst = y.data<To>();
      for (int64_t i = 0; i < n; ++i) {
        if (!parseNumber(src[i], dst[i])) {
          ctx.fail("cannot convert string '" + src[i] + "' to " + dataTypeName(to),
                   ErrorCode::kInvalidArgument);
        }
      }
    });
  } else {
    dispatchNumericOrBool(from, "Cast", [&](auto fromTag) {
      using From = typename decltype(fromTag)::type;
      dispatchNumericOrBool(to, "Cast", [&](auto toTag) {
        using To = typename decltype(toTag)::type;
        const From* src = x.data<From>();
        To* dst = y.data<To>();
        for (int64_t i = 0; i < n; ++i) dst[i] = convertNumber<To>(src[i]);
      });
    });
  }
}

// Cast's `saturate` and `round_mode` attributes only affect float8 targets (castLowPrecision).
KILN_REGISTER_CPU_KERNEL("Cast", bindKernel(castOptions, castKernel));
KILN_REGISTER_CPU_KERNEL("CastLike", bindKernel(castOptions, castKernel));

}  // namespace
}  // namespace kiln::cpu
