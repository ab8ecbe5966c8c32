// CPU kernels for elementwise math on floats: activations and unary functions.
// Float32 (and the 16-bit floats, widened to float) compute in float; float64 computes in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/activation_row.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/gelu_functions.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"
#include "backends/cpu/kernels/vector_math.h"

namespace kiln::cpu {
namespace {

// Applies fn (called with float or double) to every element of a floating-point tensor.
// `opType` names the op in the error for an unsupported dtype.
template <typename Fn>
void applyUnaryFloat(KernelContext& ctx, const std::string& opType, const Fn& fn) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), opType.c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapUnary<T, T>(x, y, fn);
  });
}

// The kernel of a float unary op with this scalar function.
template <typename Fn>
KernelFn unaryFloatFor(std::string opType, Fn fn) {
  return [opType, fn](KernelContext& ctx) { applyUnaryFloat(ctx, opType, fn); };
}

// A float unary op whose scalar function is fixed.
template <typename Fn>
KernelFactory unaryFloat(Fn fn) {
  return [fn](const KernelCreateInfo& info) -> KernelFn {
    return unaryFloatFor(info.node.opType, fn);
  };
}

// A float unary op whose scalar function depends on attributes: makeFn(node) is called once when
// the kernel is built and returns the scalar function.
template <typename MakeFn>
KernelFactory unaryFloatWithAttrs(MakeFn makeFn) {
  return [makeFn](const KernelCreateInfo& info) -> KernelFn {
    return unaryFloatFor(info.node.opType, makeFn(info.node));
  };
}

// Float32 runs the vectorised fused-activation code (activation_row.h); the other types widen per
// element and use std::exp, written so that exp never overflows: for x < 0, e^x / (1 + e^x).
void sigmoidKernel(KernelContext& ctx, const std::string& opType) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DataType::kFloat32) {
    applyActivationInParallel(Activation{ActivationKind::kSigmoid}, x.data<float>(),
                              ctx.output(0).data<float>(), x.numel());
    return;
  }
  applyUnaryFloat(ctx, opType, [](auto v) {
    using V = decltype(v);
    if (v >= 0) return V(1) / (V(1) + std::exp(-v));
    const V e = std::exp(v);
    return e / (V(1) + e);
  });
}
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Sigmoid", bindKernel(opTypeOf, sigmoidKernel), {{0}});
// Float32 through libmvec (vector_math.h); other float types element by element.
template <VectorMathFn kFn>
void vectorMathKernel(KernelContext& ctx, const std::string& opType) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DataType::kFloat32) {
    applyVectorMath(kFn, x.data<float>(), ctx.output(0).data<float>(), x.numel());
    return;
  }
  applyUnaryFloat(ctx, opType, [](auto v) {
    if constexpr (kFn == VectorMathFn::kErf)
      return std::erf(v);
    else if constexpr (kFn == VectorMathFn::kTanh)
      return std::tanh(v);
    else
      return std::exp(v);
  });
}
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Tanh",
                                    bindKernel(opTypeOf, vectorMathKernel<VectorMathFn::kTanh>),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Exp",
                                    bindKernel(opTypeOf, vectorMathKernel<VectorMathFn::kExp>),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("Log", unaryFloat([](auto x) { return std::log(x); }));
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Sqrt", unaryFloat([](auto x) { return std::sqrt(x); }), {{0}});
KILN_REGISTER_CPU_KERNEL("Reciprocal", unaryFloat([](auto x) { return decltype(x)(1) / x; }));
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Erf",
                                    bindKernel(opTypeOf, vectorMathKernel<VectorMathFn::kErf>),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Softplus", unaryFloat([](auto x) {
                                      // log(1 + e^x) = max(x, 0) + log1p(e^-|x|), exact for large
                                      // |x| and overflow-free.
                                      return std::max(x, decltype(x)(0)) +
                                             std::log1p(std::exp(-std::fabs(x)));
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("Softsign",
                         unaryFloat([](auto x) { return x / (decltype(x)(1) + std::fabs(x)); }));
KILN_REGISTER_CPU_KERNEL("Floor", unaryFloat([](auto x) { return std::floor(x); }));
KILN_REGISTER_CPU_KERNEL("Ceil", unaryFloat([](auto x) { return std::ceil(x); }));
// nearbyint rounds halfway cases to even under the default rounding mode, as ONNX requires.
KILN_REGISTER_CPU_KERNEL("Round", unaryFloat([](auto x) { return std::nearbyint(x); }));
KILN_REGISTER_CPU_KERNEL("Sin", unaryFloat([](auto x) { return std::sin(x); }));
KILN_REGISTER_CPU_KERNEL("Cos", unaryFloat([](auto x) { return std::cos(x); }));
KILN_REGISTER_CPU_KERNEL("Tan", unaryFloat([](auto x) { return std::tan(x); }));
KILN_REGISTER_CPU_KERNEL("Asin", unaryFloat([](auto x) { return std::asin(x); }));
KILN_REGISTER_CPU_KERNEL("Acos", unaryFloat([](auto x) { return std::acos(x); }));
KILN_REGISTER_CPU_KERNEL("Atan", unaryFloat([](auto x) { return std::atan(x); }));
KILN_REGISTER_CPU_KERNEL("Sinh", unaryFloat([](auto x) { return std::sinh(x); }));
KILN_REGISTER_CPU_KERNEL("Cosh", unaryFloat([](auto x) { return std::cosh(x); }));
KILN_REGISTER_CPU_KERNEL("Asinh", unaryFloat([](auto x) { return std::asinh(x); }));
KILN_REGISTER_CPU_KERNEL("Acosh", unaryFloat([](auto x) { return std::acosh(x); }));
KILN_REGISTER_CPU_KERNEL("Atanh", unaryFloat([](auto x) { return std::atanh(x); }));
KILN_REGISTER_CPU_KERNEL_WITH_RULES("HardSwish", unaryFloat([](auto x) {
                                      using V = decltype(x);
                                      return x * std::clamp(x / V(6) + V(0.5), V(0), V(1));
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("Mish", unaryFloat([](auto x) {
                           using V = decltype(x);
                           const V softplus =
                               std::max(x, V(0)) + std::log1p(std::exp(-std::fabs(x)));
                           return x * std::tanh(softplus);
                         }));

KILN_REGISTER_CPU_KERNEL_WITH_RULES("LeakyRelu", unaryFloatWithAttrs([](const ir::Node& n) {
                                      const float alpha = ir::attrFloat(n, "alpha", 0.01f);
                                      return [alpha](auto x) {
                                        return x >= 0 ? x : decltype(x)(alpha) * x;
                                      };
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Elu", unaryFloatWithAttrs([](const ir::Node& n) {
                                      const float alpha = ir::attrFloat(n, "alpha", 1.0f);
                                      return [alpha](auto x) {
                                        return x >= 0 ? x : decltype(x)(alpha) * std::expm1(x);
                                      };
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("Celu", unaryFloatWithAttrs([](const ir::Node& n) {
                           const float alpha = ir::attrFloat(n, "alpha", 1.0f);
                           if (alpha == 0.0f) ir::failNode(n, "attribute 'alpha' must not be 0");
                           return [alpha](auto x) {
                             using V = decltype(x);
                             return std::max(V(0), x) +
                                    std::min(V(0), V(alpha) * std::expm1(x / V(alpha)));
                           };
                         }));
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Selu", unaryFloatWithAttrs([](const ir::Node& n) {
                                      const float alpha =
                                          ir::attrFloat(n, "alpha", 1.67326319217681884765625f);
                                      const float gamma =
                                          ir::attrFloat(n, "gamma", 1.05070102214813232421875f);
                                      return [alpha, gamma](auto x) {
                                        using V = decltype(x);
                                        return V(gamma) * (x > 0 ? x : V(alpha) * std::expm1(x));
                                      };
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("HardSigmoid", unaryFloatWithAttrs([](const ir::Node& n) {
                                      const float alpha = ir::attrFloat(n, "alpha", 0.2f);
                                      const float beta = ir::attrFloat(n, "beta", 0.5f);
                                      return [alpha, beta](auto x) {
                                        using V = decltype(x);
                                        return std::clamp(V(alpha) * x + V(beta), V(0), V(1));
                                      };
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("ThresholdedRelu", unaryFloatWithAttrs([](const ir::Node& n) {
                           const float alpha = ir::attrFloat(n, "alpha", 1.0f);
                           return [alpha](auto x) {
                             return x > decltype(x)(alpha) ? x : decltype(x)(0);
                           };
                         }));

KILN_REGISTER_CPU_KERNEL(
    "Gelu", KernelFactory([](const KernelCreateInfo& info) -> KernelFn {
      const std::string approximate = ir::attrString(info.node, "approximate", "none");
      if (approximate == "tanh") return unaryFloatFor(info.node.opType, geluTanh);
      if (approximate != "none") {
        ir::failNode(info.node,
                     "attribute 'approximate' must be 'none' or 'tanh', got '" + approximate + "'");
      }
      return unaryFloatFor(info.node.opType, geluExact);
    }));

// ---- Arithmetic on every numeric type ----

// Ops that accept every numeric type.
template <typename Op>
KernelFactory unaryNumeric(Op op) {
  return bindKernel(opTypeOf, [op](KernelContext& ctx, const std::string& opType) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    dispatchNumeric(x.dtype(), opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapUnary<T, T>(x, y, op);
    });
  });
}

// Relu takes signed integers too (opset 14); written so that NaN stays NaN, like numpy.maximum(x,
// 0).
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Relu",
                                    unaryNumeric([](auto x) { return x < 0 ? decltype(x)(0) : x; }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Neg",
                                    unaryNumeric([](auto v) { return wrapSub(decltype(v)(0), v); }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Abs", unaryNumeric([](auto v) {
                                      using V = decltype(v);
                                      if constexpr (std::is_unsigned_v<V>)
                                        return v;
                                      else if constexpr (std::is_integral_v<V>)
                                        return v < 0 ? wrapSub(V(0), v) : v;
                                      else
                                        return std::fabs(v);
                                    }),
                                    {{0}});
KILN_REGISTER_CPU_KERNEL("Sign", unaryNumeric([](auto v) {
                           using V = decltype(v);
                           if constexpr (std::is_floating_point_v<V>) {
                             if (std::isnan(v)) return v;
                           }
                           return static_cast<V>(v > V(0) ? 1 : (v < V(0) ? -1 : 0));
                         }));

// Opset 1-6 Add/Sub/Mul/Div: with broadcast=1, B's dims line up with A's starting at `axis`
// (by default at the end); otherwise the shapes must be equal. Returns B viewed at A's rank.
struct BinaryAttrs {
  std::string opType;
  bool legacy = false;  // opset 1-6: the broadcast and axis attributes below apply
  bool broadcast = false;
  std::optional<int64_t> axis;  // none: B lines up with A's last dims
};

BinaryAttrs binaryAttrs(const ir::Node& node) {
  BinaryAttrs a;
  a.opType = node.opType;
  a.legacy = node.opset < 7;
  if (a.legacy) {
    a.broadcast = ir::attrInt(node, "broadcast", 0) != 0;
    a.axis = optionalAttrInt(node, "axis");
  }
  return a;
}

Tensor legacyBroadcastOperand(const KernelContext& ctx, const BinaryAttrs& attrs, const Tensor& a,
                              const Tensor& b) {
  if (!attrs.broadcast) {
    if (a.shape() != b.shape()) {
      ctx.fail("shapes " + shapeToString(a.shape()) + " and " + shapeToString(b.shape()) +
                   " differ and attribute 'broadcast' is 0",
               ErrorCode::kInvalidArgument);
    }
    return b;
  }
  const int64_t rankA = static_cast<int64_t>(a.rank());
  const int64_t rankB = static_cast<int64_t>(b.rank());
  if (rankB > rankA) ctx.fail("B has a higher rank than A", ErrorCode::kInvalidArgument);
  int64_t axis = attrs.axis ? *attrs.axis : rankA - rankB;
  if (axis < 0) axis += rankA;
  if (axis < 0 || axis + rankB > rankA) {
    ctx.fail("attribute 'axis' does not place B's shape " + shapeToString(b.shape()) +
                 " inside A's " + shapeToString(a.shape()),
             ErrorCode::kInvalidArgument);
  }
  Shape shape(static_cast<size_t>(rankA), 1);
  for (int64_t i = 0; i < rankB; ++i) {
    const int64_t d = b.dim(static_cast<size_t>(i));
    if (d != 1 && d != a.dim(static_cast<size_t>(axis + i))) {
      ctx.fail("cannot broadcast " + shapeToString(b.shape()) + " onto " + shapeToString(a.shape()),
               ErrorCode::kInvalidArgument);
    }
    shape[static_cast<size_t>(axis + i)] = d;
  }
  return b.reshaped(shape);
}

template <typename Op>
KernelFactory binaryNumeric(Op op) {
  return bindKernel(binaryAttrs, [op](KernelContext& ctx, const BinaryAttrs& attrs) {
    const Tensor& a = ctx.input(0);
    const Tensor b =
        attrs.legacy ? legacyBroadcastOperand(ctx, attrs, a, ctx.input(1)) : ctx.input(1);
    Tensor& y = ctx.output(0);
    dispatchNumeric(a.dtype(), attrs.opType.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapBinary<T, T>(a, b, y, op);
    });
  });
}

KILN_REGISTER_CPU_KERNEL_WITH_RULES("Add",
                                    binaryNumeric([](auto x, auto y) { return wrapAdd(x, y); }),
                                    {{0, 1}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Sub",
                                    binaryNumeric([](auto x, auto y) { return wrapSub(x, y); }),
                                    {{0, 1}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Mul",
                                    binaryNumeric([](auto x, auto y) { return wrapMul(x, y); }),
                                    {{0, 1}});
KILN_REGISTER_CPU_KERNEL_WITH_RULES("Div", binaryNumeric([](auto x, auto y) {
                                      using V = decltype(x);
                                      if constexpr (std::is_integral_v<V>) {
                                        // Truncates toward zero like C++; division by zero gives 0
                                        // (numpy's result) instead of a trap, and MIN / -1 wraps.
                                        if (y == 0) return V(0);
                                        if constexpr (std::is_signed_v<V>) {
                                          if (y == V(-1)) return wrapSub(V(0), x);
                                        }
                                        return static_cast<V>(x / y);
                                      } else {
                                        return x / y;
                                      }
                                    }),
                                    {{0, 1}});

// Integer power by squaring, wrapping on overflow like numpy; negative exponents truncate 1/x^n.
template <typename T>
T integerPow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return T(1);
      if (base == -1) return (exponent % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
  }
  T result = 1;
  while (exponent != 0) {
    if (exponent & 1) result = wrapMul(result, base);
    base = wrapMul(base, base);
    exponent = static_cast<T>(exponent / 2);
  }
  return result;
}

// Pow: the output has the base's type. With equal types, floats use pow in their compute type and
// integers exact integer powers; otherwise the exponent is widened to double and the power is
// computed in double, then converted to the base's type (int base ** float exponent truncates).
// A float power by one exponent of 1, 2, 3 or 0.5, as ONNX Runtime computes them (x, x*x, x*x*x,
// sqrt): exponents models use in LayerNorm and GELU decompositions, where pow is the slow part.
// Returns false for other exponents.
template <typename T>
bool powBySmallExponent(const Tensor& a, T exponent, Tensor& y) {
  const T* x = a.data<T>();
  T* out = y.data<T>();
  const int64_t n = a.numel();
  if (exponent == T(1)) {
    std::copy(x, x + n, out);
  } else if (exponent == T(2)) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i];
  } else if (exponent == T(3)) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * x[i] * x[i];
  } else if (exponent == T(0.5)) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(x[i]);
  } else {
    return false;
  }
  return true;
}

void powKernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  // One exponent: y has a's elements in a's order (only its rank may grow).
  if (b.numel() == 1 && a.dtype() == b.dtype() && y.numel() == a.numel()) {
    if (a.dtype() == DataType::kFloat32 && powBySmallExponent(a, b.data<float>()[0], y)) return;
    if (a.dtype() == DataType::kFloat64 && powBySmallExponent(a, b.data<double>()[0], y)) return;
  }
  if (a.dtype() == b.dtype()) {
    dispatchNumeric(a.dtype(), "Pow", [&](auto tag) {
      using T = typename decltype(tag)::type;
      mapBinary<T, T>(a, b, y, [](auto x, auto p) {
        if constexpr (std::is_integral_v<decltype(x)>)
          return integerPow(x, p);
        else
          return std::pow(x, p);
      });
    });
    return;
  }
  Tensor exponent(DataType::kFloat64, b.shape());
  double* e = exponent.data<double>();
  dispatchNumeric(b.dtype(), "Pow", [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = b.data<E>();
    for (int64_t i = 0; i < b.numel(); ++i)
      e[i] = static_cast<double>(static_cast<ComputeType<E>>(src[i]));
  });
  dispatchNumeric(a.dtype(), "Pow", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapBinaryMixed<T, double, T>(a, exponent, y, [](auto x, double p) {
      return convertNumber<T>(std::pow(static_cast<double>(x), p));
    });
  });
}
KILN_REGISTER_CPU_KERNEL("Pow", KernelFn(powKernel));

// Mod with fmod=1 takes the sign of the dividend (C fmod / %); with fmod=0 the sign of the divisor
// (Python / numpy mod, zero results signed like the divisor). Integer modulo by zero gives 0.
template <typename V>
V modValue(V x, V y, bool cStyle) {
  if constexpr (std::is_integral_v<V>) {
    if (y == 0) return V(0);
    if constexpr (std::is_signed_v<V>) {
      if (y == V(-1)) return V(0);  // avoids MIN % -1 overflow
    }
    V r = static_cast<V>(x % y);
    if constexpr (std::is_signed_v<V>) {
      if (!cStyle && r != 0 && ((r < 0) != (y < 0))) r = static_cast<V>(r + y);
    }
    return r;
  } else {
    V r = std::fmod(x, y);
    if (cStyle) return r;
    if (r == 0) return std::copysign(V(0), y);  // numpy: a zero result takes the divisor's sign
    if ((r < 0) != (y < 0)) r += y;
    return r;
  }
}

void modKernel(KernelContext& ctx, bool cStyle) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Tensor& y = ctx.output(0);
  dispatchNumeric(a.dtype(), "Mod", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (cStyle)
      mapBinary<T, T>(a, b, y, [](auto p, auto q) { return modValue(p, q, true); });
    else
      mapBinary<T, T>(a, b, y, [](auto p, auto q) { return modValue(p, q, false); });
  });
}
KILN_REGISTER_CPU_KERNEL(
    "Mod",
    bindKernel([](const ir::Node& node) { return ir::attrInt(node, "fmod", 0) != 0; }, modKernel));

// True for PRelu-1/6 models (old PyTorch exports) whose 1-D slope holds one value per channel
// (axis 1) instead of broadcasting numpy-style from the last axis.
bool isLegacyChannelSlope(int64_t opset, const Shape& x, const Shape& slope) {
  return opset < 7 && slope.size() == 1 && x.size() >= 2 && slope[0] > 1 && slope[0] == x[1];
}

// PRelu: slope broadcasts unidirectionally onto X (the output has X's shape).
void preluKernel(KernelContext& ctx, int64_t opset) {
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  if (isLegacyChannelSlope(opset, x.shape(), slope.shape())) {
    Shape perChannel(x.rank() - 1, 1);
    perChannel[0] = slope.dim(0);
    slope = slope.reshaped(perChannel);
  }
  if (broadcastShapes(ctx, x.shape(), slope.shape()) != x.shape()) {
    ctx.fail("slope shape " + shapeToString(slope.shape()) + " does not broadcast to X shape " +
                 shapeToString(x.shape()),
             ErrorCode::kInvalidArgument);
  }
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "PRelu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    mapBinary<T, T>(x, slope, y, [](auto v, auto s) { return v < 0 ? wrapMul(s, v) : v; });
  });
}
KILN_REGISTER_CPU_KERNEL("PRelu",
                         bindKernel([](const ir::Node& node) { return node.opset; }, preluKernel));

// Clip: bounds come from attributes min/max before opset 11 and from optional scalar inputs after.
// y = min(max(x, lo), hi), so lo > hi yields hi everywhere and NaN inputs stay NaN.
// Clip's min and max attributes (before opset 11); none: unbounded on that side.
struct ClipAttrs {
  std::optional<double> min, max;
};

ClipAttrs clipAttrs(const ir::Node& node) {
  ClipAttrs a;
  if (node.opset < 11) {
    if (ir::hasAttr(node, "min")) a.min = ir::attrFloat(node, "min");
    if (ir::hasAttr(node, "max")) a.max = ir::attrFloat(node, "max");
  }
  return a;
}

void clipKernel(KernelContext& ctx, const ClipAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "Clip", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    C lo = std::numeric_limits<C>::lowest();
    C hi = std::numeric_limits<C>::max();
    if constexpr (std::is_floating_point_v<C>) {
      lo = -std::numeric_limits<C>::infinity();
      hi = std::numeric_limits<C>::infinity();
    }
    // Attribute bounds are floats; clamp them into C's range before converting.
    auto attrBound = [&](const std::optional<double>& bound, C fallback) {
      if (!bound) return fallback;
      const double v = *bound;
      if constexpr (std::is_floating_point_v<C>)
        return static_cast<C>(v);
      else
        return static_cast<C>(std::clamp(v, double(std::numeric_limits<C>::lowest()),
                                         double(std::numeric_limits<C>::max())));
    };
    lo = attrBound(attrs.min, lo);
    hi = attrBound(attrs.max, hi);
    auto bound = [&](size_t i, C& value) {
      if (!ctx.hasInput(i)) return;
      const Tensor& t = ctx.input(i);
      if (t.numel() != 1)
        ctx.fail("input " + std::to_string(i) + " must be a scalar, got " + t.describe());
      if (t.dtype() != x.dtype())
        ctx.fail("bound " + t.describe() + " has another type than the input");
      value = static_cast<C>(t.data<T>()[0]);
    };
    bound(1, lo);
    bound(2, hi);
    mapUnary<T, T>(x, y, [lo, hi](C v) { return std::min(std::max(v, lo), hi); });
  });
}
KILN_REGISTER_CPU_KERNEL("Clip", bindKernel(clipAttrs, clipKernel));

// Shrink: x < -lambd -> x + bias, x > lambd -> x - bias, else 0. Integers compare and add in
// double.
struct ShrinkAttrs {
  double lambd = 0.5, bias = 0.0;
};

ShrinkAttrs shrinkAttrs(const ir::Node& node) {
  return {ir::attrFloat(node, "lambd", 0.5f), ir::attrFloat(node, "bias", 0.0f)};
}

void shrinkKernel(KernelContext& ctx, const ShrinkAttrs& attrs) {
  const double lambd = attrs.lambd;
  const double bias = attrs.bias;
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  dispatchNumeric(x.dtype(), "Shrink", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    using W = std::conditional_t<std::is_integral_v<C>, double, C>;
    const W l = static_cast<W>(lambd), b = static_cast<W>(bias);
    mapUnary<T, T>(x, y, [l, b](C v) {
      const W w = static_cast<W>(v);
      const W r = w < -l ? w + b : (w > l ? w - b : W(0));
      if constexpr (std::is_integral_v<C>)
        return convertNumber<C>(r);
      else
        return r;
    });
  });
}
KILN_REGISTER_CPU_KERNEL("Shrink", bindKernel(shrinkAttrs, shrinkKernel));

}  // namespace
}  // namespace kiln::cpu
