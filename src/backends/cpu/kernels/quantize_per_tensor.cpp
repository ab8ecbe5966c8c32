// The per-tensor candidates of QuantizeLinear (float32 -> uint8 / int8) and DequantizeLinear
// (uint8 / int8 -> float32), the edges of an int8 region, vectorized with AVX2 and split over the
// thread pool; other layouts and types take the reference kernels (quantize.cpp). They compute
// what the reference does bit for bit: x / scale in float32, clamped to [lowest - zp, highest -
// zp] (integers, so clamping before rounding equals saturating after; NaN gives lowest), rounded
// half to even, + zp; and float(x - zp) * scale, one float32 rounding of the exact product.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kMinPerThread = 1 << 16;

bool isEightBit(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// Whether input i is present with one element in a static shape.
bool isOneValue(const KernelCreateInfo& info, size_t i) {
  const ir::TypeInfo* t = i < info.inputTypes.size() ? info.inputTypes[i] : nullptr;
  if (!t || !t->shape) return false;
  for (const auto& d : *t->shape)
    if (!d.isKnown() || d.value != 1) return false;
  return true;
}

std::string perTensorDeclines(const KernelCreateInfo& info, bool quantize) {
  const ir::TypeInfo* scale = info.inputTypes.size() > 1 ? info.inputTypes[1] : nullptr;
  if (!scale || scale->dtype != DataType::kFloat32 || !isOneValue(info, 1))
    return "the scale is not one float32";
  const ir::TypeInfo* zp = info.inputTypes.size() > 2 ? info.inputTypes[2] : nullptr;
  if (!zp) return "no zero point";
  if (!isEightBit(zp->dtype) || !isOneValue(info, 2))
    return "the zero point is not one uint8 or int8";
  if (!quantize && !isEightBit(info.inputTypes[0]->dtype)) return "the input is not uint8 or int8";
  if (ir::attrInt(info.node, quantize ? "precision" : "output_dtype", 0) != 0) {
    return quantize ? "a precision attribute" : "an output_dtype attribute";
  }
  return "";
}

int32_t zeroPointOf(const Tensor& zp) {
  return zp.dtype() == DataType::kInt8 ? zp.data<int8_t>()[0] : zp.data<uint8_t>()[0];
}

void checkOneValue(const KernelContext& ctx, const Tensor& t, const char* name) {
  if (t.numel() != 1)
    ctx.fail(std::string(name) + " must hold one value, got " + t.describe(),
             ErrorCode::kInvalidArgument);
}

template <typename Q>
void quantizeRange(const float* x, int64_t n, float scale, int32_t zp, Q* y) {
  constexpr bool isSigned = std::is_signed_v<Q>;
  const float lo = static_cast<float>((isSigned ? -128 : 0) - zp),
              hi = static_cast<float>((isSigned ? 127 : 255) - zp);
  const __m256 vs = _mm256_set1_ps(scale), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256i vzp = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // max(f, lo) gives lo for NaN (vmaxps returns its second operand then).
    const __m256 f =
        _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), vlo), vhi);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), vzp);
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i bytes =
        _mm_packus_epi16(_mm_and_si128(words, _mm_set1_epi16(0xff)), _mm_setzero_si128());
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), bytes);
  }
  for (; i < n; ++i) {
    const float f = x[i] / scale;
    y[i] = static_cast<Q>((std::isnan(f)
                               ? static_cast<int32_t>(lo)
                               : static_cast<int32_t>(std::nearbyint(std::clamp(f, lo, hi)))) +
                          zp);
  }
}

void quantizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor& zp = ctx.input(2);
  checkOneValue(ctx, scale, "y_scale");
  checkOneValue(ctx, zp, "y_zero_point");
  Tensor& y = ctx.output(0);
  const float s = scale.data<float>()[0];
  const int32_t z = zeroPointOf(zp);
  const float* in = x.data<float>();
  parallelForAtLeast(x.numel(), kMinPerThread, [&](int64_t b, int64_t e) {
    if (y.dtype() == DataType::kInt8) {
      quantizeRange(in + b, e - b, s, z, y.data<int8_t>() + b);
    } else {
      quantizeRange(in + b, e - b, s, z, y.data<uint8_t>() + b);
    }
  });
}

template <typename Q>
void dequantizeRange(const Q* x, int64_t n, float scale, int32_t zp, float* y) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i vzp = _mm256_set1_epi32(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i v =
        std::is_signed_v<Q> ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, vzp)), vs));
  }
  for (; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

void dequantizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor& zp = ctx.input(2);
  checkOneValue(ctx, scale, "x_scale");
  checkOneValue(ctx, zp, "x_zero_point");
  Tensor& y = ctx.output(0);
  const float s = scale.data<float>()[0];
  const int32_t z = zeroPointOf(zp);
  float* out = y.data<float>();
  parallelForAtLeast(x.numel(), kMinPerThread, [&](int64_t b, int64_t e) {
    if (x.dtype() == DataType::kInt8) {
      dequantizeRange(x.data<int8_t>() + b, e - b, s, z, out + b);
    } else {
      dequantizeRange(x.data<uint8_t>() + b, e - b, s, z, out + b);
    }
  });
}

const bool kRegistered = [] {
  KernelRegistry& r = KernelRegistry::global();
  KernelCandidate q;
  q.id = "f32_quantize_linear_per_tensor_avx2";
  q.supports = [](const KernelCreateInfo& info) { return perTensorDeclines(info, true); };
  q.create = [](const KernelCreateInfo&) { return Kernel{quantizeKernel, {}, {}}; };
  r.addCandidate("", "QuantizeLinear", DataType::kFloat32, std::move(q));
  for (DataType dtype : {DataType::kUint8, DataType::kInt8}) {
    KernelCandidate d;
    d.id =
        std::string(dtype == DataType::kUint8 ? "u8" : "s8") + "_dequantize_linear_per_tensor_avx2";
    d.supports = [](const KernelCreateInfo& info) { return perTensorDeclines(info, false); };
    d.create = [](const KernelCreateInfo&) { return Kernel{dequantizeKernel, {}, {}}; };
    r.addCandidate("", "DequantizeLinear", dtype, std::move(d));
  }
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
