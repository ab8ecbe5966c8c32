// CPU kernels of QuantizeLinear and DequantizeLinear, with per-tensor, per-axis or blocked scales
// and zero points (see ir/ops/quantize_layout.h).
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/quantize_math.h"
#include "ir/ops/quantize_layout.h"

namespace kiln::cpu {
namespace {

// Calls fn(k, p) for every element k of x (row-major) with p, the index of its scale and zero
// point.
template <typename Fn>
void forEachElement(const ir::QuantLayout& layout, int64_t numel, Fn&& fn) {
  if (layout.perTensor) {
    for (int64_t k = 0; k < numel; ++k) fn(k, int64_t{0});
    return;
  }
  int64_t k = 0;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t a = 0; a < layout.axisDim; ++a) {
      for (int64_t i = 0; i < layout.inner; ++i) fn(k++, layout.paramIndex(o, a, i));
    }
  }
}

// What the kernels keep of the node: the attributes ir::quantLayout reads (it checks the scale's
// shape against each run's x), the division precision and float8 saturation.
struct QuantizeAttrs {
  ir::Node layout;                            // label with axis and block_size
  DataType precision = DataType::kUndefined;  // QuantizeLinear-23 on; kUndefined: numpy promotion
  bool saturate = true;
};

QuantizeAttrs quantizeAttrs(const ir::Node& node) {
  QuantizeAttrs a;
  a.layout = nodeLabelWithAttrs(node, {"axis", "block_size"});
  a.precision = static_cast<DataType>(node.opset >= 23 ? ir::attrInt(node, "precision", 0) : 0);
  a.saturate = node.opset < 19 || ir::attrInt(node, "saturate", 1) != 0;
  return a;
}

ir::QuantLayout checkedLayout(const QuantizeAttrs& attrs, const Tensor& x, const Tensor& scale,
                              const Tensor* zeroPoint) {
  return ir::quantLayout(attrs.layout, x.shape(), scale.shape(),
                         zeroPoint ? &zeroPoint->shape() : nullptr);
}

// The type x / y_scale is computed in: the precision attribute (opset 23+), else the type numpy's
// promotion gives (the ONNX reference computes x / y_scale with numpy).
DataType divisionType(const QuantizeAttrs& attrs, DataType x, DataType scale) {
  if (attrs.precision != DataType::kUndefined) return attrs.precision;
  if (x == scale && x != DataType::kInt32) return x;
  if (x == DataType::kInt32 || scale == DataType::kInt32 || x == DataType::kFloat64 ||
      scale == DataType::kFloat64) {
    return DataType::kFloat64;
  }
  return DataType::kFloat32;
}

// Calls fn(TypeTag<T>{}) for QuantizeLinear's input types.
template <typename Fn>
void dispatchQuantizeInput(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32:
      return fn(TypeTag<float>{});
    case DataType::kFloat16:
      return fn(TypeTag<Half>{});
    case DataType::kBFloat16:
      return fn(TypeTag<BFloat16>{});
    case DataType::kInt32:
      return fn(TypeTag<int32_t>{});
    default:
      throwUnsupportedType(type, "QuantizeLinear input");
  }
}

// QuantizeLinear to int4 / uint4 / int2 / uint2 (rounded, clamped to the type's range) or to
// float8 / float4 (rounded to nearest even; float8 overflow per `saturate`). C: division type.
template <typename C, typename X>
void quantizeToLowPrecision(const QuantizeAttrs& attrs, const ir::QuantLayout& layout, const X* in,
                            const std::vector<double>& scales,
                            const std::vector<double>& zeroPoints, bool hasZeroPoint, Tensor& y) {
  const DataType q = y.dtype();
  uint8_t* out = y.data<uint8_t>();
  LowPrecisionOptions options;
  options.saturate = attrs.saturate;
  const bool integer = !isFloatingPoint(q);
  const std::pair<int64_t, int64_t> range =
      integer ? lowPrecisionIntegerRange(q) : std::pair<int64_t, int64_t>{0, 0};
  const int64_t lowest = range.first,
                highest = range.second;  // not bindings: clang 14 cannot capture them
  forEachElement(layout, y.numel(), [&](int64_t k, int64_t p) {
    const double scaled = roundTo<C>(roundTo<C>(toDouble(in[k])) / scales[static_cast<size_t>(p)]);
    const double zeroPoint = zeroPoints[hasZeroPoint ? static_cast<size_t>(p) : 0];
    out[k] = integer ? integerToLowPrecision(q, roundAndClamp(scaled, zeroPoint, lowest, highest))
                     : floatToLowPrecision(q, roundTo<C>(scaled + zeroPoint), options);
  });
}

// y = saturate(round_half_even(x / y_scale) + y_zero_point).
void quantizeLinearKernel(KernelContext& ctx, const QuantizeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zeroPoint = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const ir::QuantLayout layout = checkedLayout(attrs, x, scale, zeroPoint);
  Tensor& y = ctx.output(0);
  std::vector<double> scales = valuesAsDouble(&scale, 1.0);
  const std::vector<double> zeroPoints = valuesAsDouble(zeroPoint, 0.0);
  const bool hasZeroPoint = zeroPoint != nullptr;
  dispatchFloat(
      divisionType(attrs, x.dtype(), scale.dtype()), "QuantizeLinear precision", [&](auto ctag) {
        using C = typename decltype(ctag)::type;
        for (double& s : scales) s = roundTo<C>(s);
        if (isLowPrecision(y.dtype())) {
          dispatchQuantizeInput(x.dtype(), [&](auto xtag) {
            using X = typename decltype(xtag)::type;
            quantizeToLowPrecision<C>(attrs, layout, x.data<X>(), scales, zeroPoints, hasZeroPoint,
                                      y);
          });
          return;
        }
        dispatchQuantized(y.dtype(), "QuantizeLinear output", [&](auto qtag) {
          using Q = typename decltype(qtag)::type;
          Q* out = y.data<Q>();
          dispatchQuantizeInput(x.dtype(), [&](auto xtag) {
            using X = typename decltype(xtag)::type;
            const X* in = x.data<X>();
            forEachElement(layout, x.numel(), [&](int64_t k, int64_t p) {
              const double scaled =
                  roundTo<C>(roundTo<C>(toDouble(in[k])) / scales[static_cast<size_t>(p)]);
              out[k] = roundAndSaturate<Q>(scaled,
                                           zeroPoints[hasZeroPoint ? static_cast<size_t>(p) : 0]);
            });
          });
        });
      });
}

// y = (x - x_zero_point) * x_scale, computed in float as the ONNX reference does, then stored in
// the output type (the scale's, or output_dtype).
void dequantizeLinearKernel(KernelContext& ctx, const QuantizeAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zeroPoint = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const ir::QuantLayout layout = checkedLayout(attrs, x, scale, zeroPoint);
  Tensor& y = ctx.output(0);
  const std::vector<double> scales = valuesAsDouble(&scale, 1.0);
  const std::vector<double> zeroPoints = valuesAsDouble(zeroPoint, 0.0);
  const bool hasZeroPoint = zeroPoint != nullptr;
  if (isLowPrecision(x.dtype())) {  // int4 ... float8: the same formula on the decoded values
    const uint8_t* in = x.data<uint8_t>();
    dispatchFloat(y.dtype(), "DequantizeLinear output", [&](auto ytag) {
      using Y = typename decltype(ytag)::type;
      Y* out = y.data<Y>();
      forEachElement(layout, x.numel(), [&](int64_t k, int64_t p) {
        const double shifted = lowPrecisionToFloat(x.dtype(), in[k]) -
                               zeroPoints[hasZeroPoint ? static_cast<size_t>(p) : 0];
        out[k] = static_cast<Y>(static_cast<float>(shifted * scales[static_cast<size_t>(p)]));
      });
    });
    return;
  }
  dispatchQuantized(x.dtype(), "DequantizeLinear input", [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    const X* in = x.data<X>();
    dispatchFloat(y.dtype(), "DequantizeLinear output", [&](auto ytag) {
      using Y = typename decltype(ytag)::type;
      Y* out = y.data<Y>();
      forEachElement(layout, x.numel(), [&](int64_t k, int64_t p) {
        const double shifted =
            toDouble(in[k]) - zeroPoints[hasZeroPoint ? static_cast<size_t>(p) : 0];
        out[k] = static_cast<Y>(static_cast<float>(shifted * scales[static_cast<size_t>(p)]));
      });
    });
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("QuantizeLinear", bindKernel(quantizeAttrs, quantizeLinearKernel));
KILN_REGISTER_CPU_KERNEL("DequantizeLinear", bindKernel(quantizeAttrs, dequantizeLinearKernel));

}  // namespace kiln::cpu
