// CPU kernels of com.microsoft ScaledSiLU, GatedAdd, GatedRMSNorm, BranchwiseRMSNorm, EngramGate
// and UnfoldTensor (shape rules and semantics in ir/ops/contrib_llm_norms.cpp). The float ops
// compute in float32 and round to the tensor type where onnxruntime does (ScaledSiLU after each
// step, GatedAdd after the product, the norms once at the end); the RMS statistics are the ones of
// RMSNormalization (rmsStats, norm_util.h). Shapes were checked by the shape rules, which run
// again on the concrete shapes of every call.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/norm_util.h"

namespace kiln::cpu {
namespace {

/// v rounded to T (a no-op for float).
template <typename T>
float roundTo(float v) {
  return static_cast<float>(static_cast<ComputeType<T>>(static_cast<T>(v)));
}

template <typename T>
float load(const T* p, int64_t i) {
  return static_cast<float>(static_cast<ComputeType<T>>(p[i]));
}

/// sigmoid without overflow of exp for large |v|.
float stableSigmoid(float v) {
  if (v >= 0.0f) return 1.0f / (1.0f + std::exp(-v));
  const float e = std::exp(v);
  return e / (1.0f + e);
}

/// A float tensor's element i as float, whatever its float type.
float floatAt(const Tensor& t, int64_t i) {
  return dispatchFloat(t.dtype(), "scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return load(t.data<T>(), i);
  });
}

void scaledSiLUKernel(KernelContext& ctx, float alpha) {
  const Tensor& x = ctx.input(0);
  const float scale = ctx.hasInput(1) ? floatAt(ctx.input(1), 0) : alpha;
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "ScaledSiLU", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallelForAtLeast(x.numel(), kMinElementsPerThread, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float z = roundTo<T>(load(in, i) * scale);
        out[i] = static_cast<T>(z * roundTo<T>(stableSigmoid(z)));
      }
    });
  });
}

void gatedAddKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t columns = x.dim(x.rank() - 1);
  Tensor& out = ctx.output(0);
  if (x.numel() == 0) return;
  dispatchFloat(x.dtype(), "GatedAdd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* a = x.data<T>();
    const T* b = ctx.input(1).template data<T>();
    const T* gate = ctx.input(2).template data<T>();
    T* z = out.data<T>();
    parallelForAtLeast(x.numel() / columns, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float g = load(gate, r);
        for (int64_t i = r * columns; i < (r + 1) * columns; ++i)
          z[i] = static_cast<T>(load(a, i) + roundTo<T>(load(b, i) * g));
      }
    });
  });
}

struct GatedRMSNormAttrs {
  float epsilon;
  bool sigmoidGate;  // sigmoid(gate), else silu / swish: gate * sigmoid(gate)
};

GatedRMSNormAttrs gatedRMSNormAttrs(const ir::Node& node) {
  return {ir::attrFloat(node, "epsilon", 1e-5f),
          ir::attrString(node, "activation", "silu") == "sigmoid"};
}

void gatedRMSNormKernel(KernelContext& ctx, const GatedRMSNormAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const int64_t c = ctx.input(1).numel();
  Tensor& y = ctx.output(0);
  dispatchFloat(x.dtype(), "GatedRMSNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    const T* scale = ctx.input(1).template data<T>();
    const T* gate = ctx.input(2).template data<T>();
    T* out = y.data<T>();
    parallelForAtLeast(x.numel() / c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const float inv = static_cast<float>(rmsStats(in + g * c, c, attrs.epsilon).invStd);
        for (int64_t k = 0; k < c; ++k) {
          const int64_t i = g * c + k;
          const float z = load(gate, i);
          const float act = attrs.sigmoidGate ? stableSigmoid(z) : z * stableSigmoid(z);
          out[i] = static_cast<T>(load(in, i) * inv * load(scale, k) * act);
        }
      }
    });
  });
}

struct BranchwiseAttrs {
  float epsilon;
  int64_t branches;  // 0: grouped (..., C, H)
};

BranchwiseAttrs branchwiseAttrs(const ir::Node& node) {
  return {ir::attrFloat(node, "epsilon", 1e-5f), ir::attrInt(node, "num_branches", 0)};
}

void branchwiseRMSNormKernel(KernelContext& ctx, const BranchwiseAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const int64_t branches = attrs.branches ? attrs.branches : x.dim(x.rank() - 2);
  const int64_t hidden =
      attrs.branches ? x.dim(x.rank() - 1) / attrs.branches : x.dim(x.rank() - 1);
  const Tensor* scale = ctx.hasInput(1) ? &ctx.input(1) : nullptr;
  const bool perHidden = scale && scale->numel() == hidden;
  std::vector<float> weights;
  if (scale) {
    weights.resize(static_cast<size_t>(scale->numel()));
    for (int64_t i = 0; i < scale->numel(); ++i) weights[i] = floatAt(*scale, i);
  }
  Tensor& y = ctx.output(0);
  if (hidden == 0) return;
  dispatchFloat(x.dtype(), "BranchwiseRMSNorm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallelForAtLeast(x.numel() / hidden, 1, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const float inv =
            static_cast<float>(rmsStats(in + g * hidden, hidden, attrs.epsilon).invStd);
        const float* w =
            weights.empty() ? nullptr : weights.data() + (perHidden ? 0 : (g % branches) * hidden);
        for (int64_t k = 0; k < hidden; ++k) {
          const int64_t i = g * hidden + k;
          out[i] = static_cast<T>(load(in, i) * inv * (w ? w[k] : 1.0f));
        }
      }
    });
  });
}

// Per (token, stream) row: the gate of the RMS-normalized key and query, times the token's value;
// the normalized output reads the rounded output, as onnxruntime's does.
void engramGateKernel(KernelContext& ctx, float epsilon) {
  const Tensor& key = ctx.input(0);
  const int64_t streams = key.dim(2), hidden = key.dim(3);
  const int64_t rows = key.dim(0) * key.dim(1) * streams;
  Tensor& y = ctx.output(0);
  Tensor* normed = ctx.wantsOutput(1) ? &ctx.output(1) : nullptr;
  if (hidden == 0) return;
  dispatchFloat(key.dtype(), "EngramGate", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* k = key.data<T>();
    const T* q = ctx.input(1).template data<T>();
    const T* v = ctx.input(2).template data<T>();
    const T* kScale = ctx.input(3).template data<T>();
    const T* qScale = ctx.input(4).template data<T>();
    const T* cScale = normed ? ctx.input(5).template data<T>() : nullptr;
    T* out = y.data<T>();
    T* outNormed = normed ? normed->data<T>() : nullptr;
    parallelForAtLeast(rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t g = row % streams, token = row / streams;
        const T* kr = k + row * hidden;
        const T* qr = q + row * hidden;
        const float kInv = static_cast<float>(rmsStats(kr, hidden, epsilon).invStd);
        const float qInv = static_cast<float>(rmsStats(qr, hidden, epsilon).invStd);
        float dot = 0.0f;
        for (int64_t c = 0; c < hidden; ++c) {
          dot += load(kr, c) * kInv * load(kScale, g * hidden + c) * load(qr, c) * qInv *
                 load(qScale, g * hidden + c);
        }
        dot /= std::sqrt(static_cast<float>(hidden));
        const float magnitude = std::sqrt(std::max(std::fabs(dot), 1e-6f));
        const float gate = stableSigmoid(dot < 0.0f ? -magnitude : magnitude);
        T* o = out + row * hidden;
        for (int64_t c = 0; c < hidden; ++c)
          o[c] = static_cast<T>(gate * load(v, token * hidden + c));
        if (!outNormed) continue;
        const float inv = static_cast<float>(rmsStats(o, hidden, epsilon).invStd);
        for (int64_t c = 0; c < hidden; ++c)
          outNormed[row * hidden + c] =
              static_cast<T>(load(o, c) * inv * load(cScale, g * hidden + c));
      }
    });
  });
}

struct UnfoldAttrs {
  int64_t dim, size, step;
};

UnfoldAttrs unfoldAttrs(const ir::Node& node) {
  return {ir::attrInt(node, "dim", -1), ir::attrInt(node, "size"), ir::attrInt(node, "step", 1)};
}

// out[lead, window, tail, j] = in[lead, window * step + j, tail].
void unfoldTensorKernel(KernelContext& ctx, const UnfoldAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  const size_t dim =
      static_cast<size_t>(attrs.dim < 0 ? attrs.dim + static_cast<int64_t>(rank) : attrs.dim);
  const int64_t lead = dimProduct(x.shape(), 0, dim);
  const int64_t tail = dimProduct(x.shape(), dim + 1, rank);
  const int64_t length = x.dim(dim);
  const int64_t windows = (length - attrs.size) / attrs.step + 1;
  Tensor& y = ctx.output(0);
  dispatchStorage(x.dtype(), "UnfoldTensor", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    int64_t o = 0;
    for (int64_t l = 0; l < lead; ++l)
      for (int64_t w = 0; w < windows; ++w)
        for (int64_t t = 0; t < tail; ++t)
          for (int64_t j = 0; j < attrs.size; ++j)
            out[o++] = in[(l * length + w * attrs.step + j) * tail + t];
  });
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN(
    "com.microsoft", "ScaledSiLU",
    bindKernel([](const ir::Node& node) { return ir::attrFloat(node, "alpha", 1.0f); },
               scaledSiLUKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatedAdd", KernelFn(gatedAddKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "GatedRMSNorm",
                                bindKernel(gatedRMSNormAttrs, gatedRMSNormKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "BranchwiseRMSNorm",
                                bindKernel(branchwiseAttrs, branchwiseRMSNormKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN(
    "com.microsoft", "EngramGate",
    bindKernel([](const ir::Node& node) { return ir::attrFloat(node, "epsilon", 1e-5f); },
               engramGateKernel));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft", "UnfoldTensor",
                                bindKernel(unfoldAttrs, unfoldTensorKernel));

}  // namespace kiln::cpu
