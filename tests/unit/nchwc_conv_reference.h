// The convolution cases of the NchwcConv tests, their NchwcConvShape and a direct reference
// loop in double over NCHW, shared by nchwc_conv_test.cpp and nchwc_scale_test.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "activation_reference.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/kernels/nchwc_conv.h"
#include "ir/ops/nchwc_groups.h"

namespace kiln::testing {

struct ConvCase {
  std::string name;
  int64_t n, ci, co, h, w;
  int64_t kh, kw, sh, sw;
  int64_t padTop, padLeft, padBottom, padRight;
  int64_t dh = 1, dw = 1;
  bool depthwise = false, plain = false;
  int64_t group = 1;  // grouped (not depthwise): Ci / group -> Co / group channels per group

  int64_t outH() const { return (h + padTop + padBottom - dh * (kh - 1) - 1) / sh + 1; }
  int64_t outW() const { return (w + padLeft + padRight - dw * (kw - 1) - 1) / sw + 1; }
  int64_t inPerGroup() const { return depthwise ? 1 : ci / group; }
};

// Square kernel k, stride s, symmetric pad p.
inline ConvCase square(std::string name, int64_t n, int64_t ci, int64_t co, int64_t h, int64_t w,
                       int64_t k, int64_t s, int64_t p) {
  return ConvCase{std::move(name), n, ci, co, h, w, k, k, s, s, p, p, p, p};
}

// act(conv(x, w) + b + z) in double over NCHW.
inline std::vector<float> reference(const ConvCase& t, const std::vector<float>& x,
                                    const std::vector<float>& w, const std::vector<float>& b,
                                    const std::vector<float>* z, const cpu::Activation& act) {
  const int64_t oh = t.outH(), ow = t.outW(), cpg = t.inPerGroup();
  std::vector<float> y(static_cast<size_t>(t.n * t.co * oh * ow));
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t o = 0; o < t.co; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b[o];
          for (int64_t c = 0; c < cpg; ++c) {
            const int64_t ic = t.depthwise ? o : o / (t.co / t.group) * cpg + c;
            for (int64_t ky = 0; ky < t.kh; ++ky)
              for (int64_t kx = 0; kx < t.kw; ++kx) {
                const int64_t iy = oy * t.sh - t.padTop + ky * t.dh,
                              ix = ox * t.sw - t.padLeft + kx * t.dw;
                if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                acc += double(x[((i * t.ci + ic) * t.h + iy) * t.w + ix]) *
                       w[((o * cpg + c) * t.kh + ky) * t.kw + kx];
              }
          }
          const size_t at = static_cast<size_t>(((i * t.co + o) * oh + oy) * ow + ox);
          if (z) acc += (*z)[at];
          y[at] = static_cast<float>(cpu::testing::activationReference(act, acc));
        }
  return y;
}

inline cpu::NchwcConvShape shapeOf(const ConvCase& t) {
  cpu::NchwcConvShape s;
  s.batch = t.n;
  s.inChannels = t.ci;
  s.outChannels = t.co;
  s.height = t.h;
  s.width = t.w;
  s.outHeight = t.outH();
  s.outWidth = t.outW();
  s.kernelH = t.kh;
  s.kernelW = t.kw;
  s.strideH = t.sh;
  s.strideW = t.sw;
  s.dilationH = t.dh;
  s.dilationW = t.dw;
  s.padTop = t.padTop;
  s.padLeft = t.padLeft;
  s.plainInput = t.plain;
  s.depthwise = t.depthwise;
  if (t.group != 1) {
    s.groups = t.group;
    s.groupsPerSlice = ir::nchwcGroupSlices(t.ci, t.co, t.group).groupsPerSlice;
  }
  return s;
}

}  // namespace kiln::testing
