// CPU kernels of DFT and STFT. Transforms run in double with exact twiddle factors (the phase
// index k * n is reduced mod L before the sine/cosine), so float results match numpy's FFT to
// the last bits the suite checks.
#include <cmath>
#include <complex>
#include <numbers>

#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "backends/cpu/kernels/run_checks.h"

namespace kiln::cpu {
namespace {

using Complex = std::complex<double>;

/// exp(-2 pi i m / L) for m in [0, L).
std::vector<Complex> twiddles(int64_t length) {
  std::vector<Complex> w(static_cast<size_t>(length));
  for (int64_t m = 0; m < length; ++m) {
    const double angle =
        -2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(length);
    w[m] = Complex(std::cos(angle), std::sin(angle));
  }
  return w;
}

/// out[k] = sum_n in[n] w^(+-k n) for k < outCount over a signal zero-padded or truncated to L =
/// w.size(); the inverse conjugates the twiddles and divides by L.
void dftLine(const std::vector<Complex>& in, const std::vector<Complex>& w, bool inverse,
             int64_t outCount, Complex* out) {
  const auto length = static_cast<int64_t>(w.size());
  const int64_t used = std::min<int64_t>(length, static_cast<int64_t>(in.size()));
  for (int64_t k = 0; k < outCount; ++k) {
    Complex sum = 0;
    for (int64_t n = 0; n < used; ++n) {
      const Complex t = w[(k * n) % length];
      sum += in[n] * (inverse ? std::conj(t) : t);
    }
    out[k] = inverse ? sum / static_cast<double>(length) : sum;
  }
}

/// The real signal of length L whose one-sided spectrum is `in` (numpy's irfft): bins past L/2
/// are the conjugates of the ones below, and the imaginary parts of bin 0 and L/2 do not matter.
void inverseRealLine(const std::vector<Complex>& in, const std::vector<Complex>& w, double* out) {
  const auto length = static_cast<int64_t>(w.size());
  std::vector<Complex> full(static_cast<size_t>(length));
  const int64_t half = length / 2;
  for (int64_t k = 0; k <= half && k < static_cast<int64_t>(in.size()); ++k) {
    full[k] = in[k];
    if (k > 0 && k < length - k) full[length - k] = std::conj(in[k]);
  }
  std::vector<Complex> result(static_cast<size_t>(length));
  dftLine(full, w, true, length, result.data());
  for (int64_t n = 0; n < length; ++n) out[n] = result[n].real();
}

/// Reads an input of shape [..., 1 or 2] as complex doubles.
template <typename T>
std::vector<Complex> readComplex(const Tensor& t) {
  const bool isComplex = t.shape().back() == 2;
  const int64_t count = t.numel() / t.shape().back();
  const T* p = t.data<T>();
  std::vector<Complex> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double re = static_cast<double>(static_cast<ComputeType<T>>(p[isComplex ? 2 * i : i]));
    const double im =
        isComplex ? static_cast<double>(static_cast<ComputeType<T>>(p[2 * i + 1])) : 0.0;
    v[i] = Complex(re, im);
  }
  return v;
}

template <typename T>
T fromDouble(double v) {
  return static_cast<T>(static_cast<ComputeType<T>>(v));
}

int64_t scalarInputInt(KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(std::string(what) + " must hold one value, got " + t.describe(),
             ErrorCode::kInvalidArgument);
  return t.intAt(0);
}

struct DftAttrs {
  bool inverse = false, onesided = false;
  std::optional<int64_t> axis;  // the attribute before opset 20, input 2 (default -2) from then on
};

DftAttrs dftAttrs(const ir::Node& node) {
  DftAttrs a{ir::attrInt(node, "inverse", 0) != 0, ir::attrInt(node, "onesided", 0) != 0,
             std::nullopt};
  if (node.opset < 20) a.axis = ir::attrInt(node, "axis", 1);
  return a;
}

void dftKernel(KernelContext& ctx, const DftAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const auto rank = static_cast<int64_t>(x.rank());
  if (rank < 2 || (x.shape().back() != 1 && x.shape().back() != 2)) {
    ctx.fail("input must be [..., 1 or 2], got " + x.describe(), ErrorCode::kInvalidArgument);
  }
  const bool inverse = attrs.inverse;
  const bool onesided = attrs.onesided;
  int64_t axis = attrs.axis ? *attrs.axis : (ctx.hasInput(2) ? scalarInputInt(ctx, 2, "axis") : -2);
  axis = normalizeAxis(ctx, axis, rank);
  if (axis == rank - 1)
    ctx.fail("axis must not be the last (real/imaginary) dim", ErrorCode::kInvalidArgument);
  const int64_t n = x.dim(static_cast<size_t>(axis));
  const bool inverseReal = inverse && onesided;
  const int64_t length =
      ctx.hasInput(1) ? scalarInputInt(ctx, 1, "dft_length") : (inverseReal ? 2 * (n - 1) : n);
  if (length < 1)
    ctx.fail("dft_length must be positive, got " + std::to_string(length),
             ErrorCode::kInvalidArgument);
  const int64_t outCount = (!inverse && onesided) ? length / 2 + 1 : length;
  Shape outShape = x.shape();
  outShape[axis] = outCount;
  outShape.back() = inverseReal ? 1 : 2;
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  // An empty output has nothing to compute, however long the axis and dft_length (which size
  // the scratch below).
  if (y.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < rank - 1; ++i) inner *= x.dim(i);
  const std::vector<Complex> w = twiddles(length);
  dispatchFloat(x.dtype(), "DFT", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<Complex> signal = readComplex<T>(x);
    T* out = y.data<T>();
    std::vector<Complex> line(static_cast<size_t>(n));
    std::vector<Complex> spectrum(static_cast<size_t>(outCount));
    std::vector<double> real(static_cast<size_t>(length));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t k = 0; k < n; ++k) line[k] = signal[(o * n + k) * inner + i];
        if (inverseReal) {
          inverseRealLine(line, w, real.data());
          for (int64_t k = 0; k < length; ++k)
            out[(o * length + k) * inner + i] = fromDouble<T>(real[k]);
          continue;
        }
        dftLine(line, w, inverse, outCount, spectrum.data());
        for (int64_t k = 0; k < outCount; ++k) {
          T* dst = out + 2 * ((o * outCount + k) * inner + i);
          dst[0] = fromDouble<T>(spectrum[k].real());
          dst[1] = fromDouble<T>(spectrum[k].imag());
        }
      }
    }
  });
}

void stftKernel(KernelContext& ctx, bool onesided) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    ctx.fail("signal must be [batch, length, 1 or 2], got " + x.describe(),
             ErrorCode::kInvalidArgument);
  const int64_t step = scalarInputInt(ctx, 1, "frame_step");
  if (step < 1)
    ctx.fail("frame_step must be positive, got " + std::to_string(step),
             ErrorCode::kInvalidArgument);
  const Tensor* window = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  if (window && window->rank() != 1)
    ctx.fail("window must be 1-D, got " + window->describe(), ErrorCode::kInvalidArgument);
  int64_t frameLength = ctx.hasInput(3) ? scalarInputInt(ctx, 3, "frame_length")
                                        : (window ? window->dim(0) : x.dim(1));
  if (window && window->dim(0) != frameLength) {
    ctx.fail("window " + window->describe() + " does not match frame_length " +
                 std::to_string(frameLength),
             ErrorCode::kInvalidArgument);
  }
  if (frameLength < 1 || frameLength > x.dim(1)) {
    ctx.fail("frame_length " + std::to_string(frameLength) + " must be in [1, " +
                 std::to_string(x.dim(1)) + "]",
             ErrorCode::kInvalidArgument);
  }
  const int64_t batches = x.dim(0), length = x.dim(1);
  const int64_t frames = (length - frameLength) / step + 1;
  const int64_t bins = onesided ? frameLength / 2 + 1 : frameLength;
  Tensor& y = ctx.allocateOutput(0, x.dtype(), {batches, frames, bins, 2});
  if (y.numel() == 0) return;  // as DFT's: the scratch below is sized by frame_length alone
  const std::vector<Complex> w = twiddles(frameLength);
  dispatchFloat(x.dtype(), "STFT", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<Complex> signal = readComplex<T>(x);
    std::vector<double> weights(static_cast<size_t>(frameLength), 1.0);
    if (window) {
      dispatchFloat(window->dtype(), "STFT window", [&](auto wtag) {
        using W = typename decltype(wtag)::type;
        for (int64_t i = 0; i < frameLength; ++i)
          weights[i] = static_cast<double>(static_cast<ComputeType<W>>(window->data<W>()[i]));
      });
    }
    T* out = y.data<T>();
    std::vector<Complex> frame(static_cast<size_t>(frameLength));
    std::vector<Complex> spectrum(static_cast<size_t>(bins));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        const Complex* src = signal.data() + b * length + f * step;
        for (int64_t i = 0; i < frameLength; ++i) frame[i] = src[i] * weights[i];
        dftLine(frame, w, false, bins, spectrum.data());
        T* dst = out + (b * frames + f) * bins * 2;
        for (int64_t k = 0; k < bins; ++k) {
          dst[2 * k] = fromDouble<T>(spectrum[k].real());
          dst[2 * k + 1] = fromDouble<T>(spectrum[k].imag());
        }
      }
    }
  });
}

KILN_REGISTER_CPU_KERNEL("DFT", bindKernel(dftAttrs, dftKernel));
KILN_REGISTER_CPU_KERNEL(
    "STFT", bindKernel([](const ir::Node& node) { return ir::attrInt(node, "onesided", 1) != 0; },
                       stftKernel));

}  // namespace
}  // namespace kiln::cpu
