// CPU kernels for elementwise math: unary functions and broadcast arithmetic.
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"

namespace kiln::cpu {
namespace {

// A float unary op: fn(node) returns the scalar function (so attributes are read once).
template <typename MakeFn>
KernelFactory unaryFloat(MakeFn makeFn) {
  return [makeFn](const KernelCreateInfo& info) -> KernelFn {
    auto fn = makeFn(info.node);
    return [fn](KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor& y = ctx.output(0);
      dispatchFloat(x.dtype(), ctx.node().opType.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        mapUnary<T, T>(x, y, [&](auto v) { return static_cast<decltype(v)>(fn(static_cast<double>(v))); });
      });
    };
  };
}

template <typename Fn>
KernelFactory simple(Fn fn) {
  return unaryFloat([fn](const ir::Node&) { return fn; });
}

double erfInvSqrt2(double x) { return std::erf(x / std::sqrt(2.0)); }

KILN_REGISTER_CPU_KERNEL("Relu", simple([](double x) { return x > 0 ? x : 0.0; }));
KILN_REGISTER_CPU_KERNEL("Sigmoid", simple([](double x) { return 1.0 / (1.0 + std::exp(-x)); }));
KILN_REGISTER_CPU_KERNEL("Tanh", simple([](double x) { return std::tanh(x); }));
KILN_REGISTER_CPU_KERNEL("Exp", simple([](double x) { return std::exp(x); }));
KILN_REGISTER_CPU_KERNEL("Log", simple([](double x) { return std::log(x); }));
KILN_REGISTER_CPU_KERNEL("Sqrt", simple([](double x) { return std::sqrt(x); }));
KILN_REGISTER_CPU_KERNEL("Reciprocal", simple([](double x) { return 1.0 / x; }));
KILN_REGISTER_CPU_KERNEL("Erf", simple([](double x) { return std::erf(x); }));
KILN_REGISTER_CPU_KERNEL("Softplus", simple([](double x) { return x > 30 ? x : std::log1p(std::exp(x)); }));
KILN_REGISTER_CPU_KERNEL("Softsign", simple([](double x) { return x / (1.0 + std::fabs(x)); }));
KILN_REGISTER_CPU_KERNEL("Floor", simple([](double x) { return std::floor(x); }));
KILN_REGISTER_CPU_KERNEL("Ceil", simple([](double x) { return std::ceil(x); }));
KILN_REGISTER_CPU_KERNEL("Round", simple([](double x) { return std::nearbyint(x); }));  // half to even
KILN_REGISTER_CPU_KERNEL("Sin", simple([](double x) { return std::sin(x); }));
KILN_REGISTER_CPU_KERNEL("Cos", simple([](double x) { return std::cos(x); }));
KILN_REGISTER_CPU_KERNEL("Tan", simple([](double x) { return std::tan(x); }));
KILN_REGISTER_CPU_KERNEL("Asin", simple([](double x) { return std::asin(x); }));
KILN_REGISTER_CPU_KERNEL("Acos", simple([](double x) { return std::acos(x); }));
KILN_REGISTER_CPU_KERNEL("Atan", simple([](double x) { return std::atan(x); }));
KILN_REGISTER_CPU_KERNEL("Sinh", simple([](double x) { return std::sinh(x); }));
KILN_REGISTER_CPU_KERNEL("Cosh", simple([](double x) { return std::cosh(x); }));
KILN_REGISTER_CPU_KERNEL("Asinh", simple([](double x) { return std::asinh(x); }));
KILN_REGISTER_CPU_KERNEL("Acosh", simple([](double x) { return std::acosh(x); }));
KILN_REGISTER_CPU_KERNEL("Atanh", simple([](double x) { return std::atanh(x); }));
KILN_REGISTER_CPU_KERNEL("HardSwish", simple([](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }));
KILN_REGISTER_CPU_KERNEL("Mish", simple([](double x) { return x * std::tanh(std::log1p(std::exp(x))); }));

KILN_REGISTER_CPU_KERNEL("LeakyRelu", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 0.01f);
  return [alpha](double x) { return x >= 0 ? x : alpha * x; };
}));
KILN_REGISTER_CPU_KERNEL("Elu", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 1.0f);
  return [alpha](double x) { return x >= 0 ? x : alpha * (std::exp(x) - 1.0); };
}));
KILN_REGISTER_CPU_KERNEL("Celu", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 1.0f);
  return [alpha](double x) { return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0)); };
}));
KILN_REGISTER_CPU_KERNEL("Selu", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 1.67326319217681884765625f);
  double gamma = ir::attrFloat(n, "gamma", 1.05070102214813232421875f);
  return [alpha, gamma](double x) { return gamma * (x > 0 ? x : alpha * (std::exp(x) - 1.0)); };
}));
KILN_REGISTER_CPU_KERNEL("HardSigmoid", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 0.2f);
  double beta = ir::attrFloat(n, "beta", 0.5f);
  return [alpha, beta](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); };
}));
KILN_REGISTER_CPU_KERNEL("ThresholdedRelu", unaryFloat([](const ir::Node& n) {
  double alpha = ir::attrFloat(n, "alpha", 1.0f);
  return [alpha](double x) { return x > alpha ? x : 0.0; };
}));
KILN_REGISTER_CPU_KERNEL("Gelu", unaryFloat([](const ir::Node& n) -> std::function<double(double)> {
  std::string approximate = ir::attrString(n, "approximate", "none");
  if (approximate == "tanh") {
    return [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); };
  }
  if (approximate != "none") ir::failNode(n, "attribute 'approximate' must be 'none' or 'tanh', got '" + approximate + "'");
  return [](double x) { return 0.5 * x * (1.0 + erfInvSqrt2(x)); };
}));

// Neg, Abs and Sign accept every numeric type.
template <typename Op>
KernelFn unaryNumeric(Op op) {
  return [op](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    dispatchNumeric(x.dtype(), ctx.node().opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapUnary<T, T>(x, y, op);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("Neg", unaryNumeric([](auto v) { return static_cast<decltype(v)>(-v); }));
KILN_REGISTER_CPU_KERNEL("Abs", unaryNumeric([](auto v) {
  if constexpr (std::is_unsigned_v<decltype(v)>) return v;
  else return static_cast<decltype(v)>(v < 0 ? -v : v);
}));
KILN_REGISTER_CPU_KERNEL("Sign", unaryNumeric([](auto v) {
  using V = decltype(v);
  return static_cast<V>(v > V(0) ? 1 : (v < V(0) ? -1 : 0));
}));

template <typename Op>
KernelFn binaryNumeric(Op op) {
  return [op](KernelContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor& y = ctx.output(0);
    dispatchNumeric(a.dtype(), ctx.node().opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapBinary<T, T>(a, b, y, op);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("Add", binaryNumeric([](auto x, auto y) { return x + y; }));
KILN_REGISTER_CPU_KERNEL("Sub", binaryNumeric([](auto x, auto y) { return x - y; }));
KILN_REGISTER_CPU_KERNEL("Mul", binaryNumeric([](auto x, auto y) { return x * y; }));
KILN_REGISTER_CPU_KERNEL("Div", binaryNumeric([](auto x, auto y) {
  using V = decltype(x);
  if constexpr (std::is_integral_v<V>) {
    return y == 0 ? V(0) : static_cast<V>(x / y);  // integer division by zero: 0, not a crash
  } else {
    return x / y;
  }
}));

// Pow: base and exponent may differ in type; computed in double like the ONNX reference.
KernelFn powKernel = [](KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  Tensor e = b;
  if (b.dtype() != a.dtype()) {  // convert the exponent to the base's type via double
    e = Tensor(a.dtype(), b.shape());
    dispatchNumeric(a.dtype(), "Pow", [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < b.numel(); ++i) e.data<T>()[i] = static_cast<T>(b.doubleAt(i));
    });
  }
  dispatchNumeric(a.dtype(), "Pow", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapBinary<T, T>(a, e, y, [](auto x, auto p) {
      return static_cast<decltype(x)>(std::pow(static_cast<double>(x), static_cast<double>(p)));
    });
  });
};
KILN_REGISTER_CPU_KERNEL("Pow", powKernel);

}  // namespace
}  // namespace kiln::cpu
