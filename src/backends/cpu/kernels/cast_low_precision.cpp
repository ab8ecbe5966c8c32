#include "backends/cpu/kernels/cast_low_precision.h"

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {
namespace {

bool isLowPrecisionInteger(DataType t) {
  return t == DataType::kInt4 || t == DataType::kUint4 || t == DataType::kInt2 ||
         t == DataType::kUint2;
}

// Low-precision source: its exact value, as int64 for the integer formats (so int4 -> uint8
// wraps like any integer cast), else as float.
template <typename To>
To fromLowPrecision(DataType from, uint8_t bits, DataType to, const LowPrecisionOptions& options) {
  const float value = lowPrecisionToFloat(from, bits);
  if constexpr (std::is_same_v<To, uint8_t>) {
    if (isLowPrecision(to)) {  // low -> low
      if (isLowPrecisionInteger(from))
        return integerToLowPrecision(to, static_cast<int64_t>(value), options);
      return floatToLowPrecision(to, value, options);
    }
  }
  if (isLowPrecisionInteger(from)) return convertNumber<To>(static_cast<int64_t>(value));
  return convertNumber<To>(value);
}

}  // namespace

LowPrecisionOptions castOptions(const ir::Node& node) {
  LowPrecisionOptions options;
  options.saturate = node.opset < 19 || ir::attrInt(node, "saturate", 1) != 0;
  const std::string mode = node.opset >= 24 ? ir::attrString(node, "round_mode", "up") : "up";
  if (!parseE8M0Rounding(mode, &options.e8m0Rounding)) {
    ir::failNode(node, "round_mode must be 'up', 'down' or 'nearest', got '" + mode + "'");
  }
  return options;
}

void castLowPrecision(const Tensor& x, Tensor& y, const LowPrecisionOptions& options) {
  const int64_t n = x.numel();
  const DataType from = x.dtype();
  const DataType to = y.dtype();
  if (isLowPrecision(from)) {
    const uint8_t* src = x.data<uint8_t>();
    if (isLowPrecision(to)) {
      uint8_t* dst = y.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) dst[i] = fromLowPrecision<uint8_t>(from, src[i], to, options);
      return;
    }
    dispatchNumericOrBool(to, "Cast", [&](auto tag) {
      using To = typename decltype(tag)::type;
      To* dst = y.data<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = fromLowPrecision<To>(from, src[i], to, options);
    });
    return;
  }
  uint8_t* dst = y.data<uint8_t>();
  dispatchNumericOrBool(from, "Cast", [&](auto tag) {
    using From = typename decltype(tag)::type;
    const From* src = x.data<From>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<From>) {
        // int4 / int2 targets keep the low bits of the exact integer; float targets round it.
        dst[i] = isLowPrecisionInteger(to)
                     ? integerToLowPrecision(to, static_cast<int64_t>(src[i]), options)
                     : floatToLowPrecision(to, static_cast<double>(src[i]), options);
      } else {
        dst[i] = floatToLowPrecision(
            to, static_cast<double>(static_cast<ComputeType<From>>(src[i])), options);
      }
    }
  });
}

}  // namespace kiln::cpu
