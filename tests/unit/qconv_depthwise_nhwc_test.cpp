// The NHWC depthwise 8-bit convolution (backends/cpu/qgemm/qconv_depthwise_nhwc.h) against a naive
// integer loop, bit for bit: 3x3 at strides 1 and 2, kernels 1 to 4 wide and up to 5 tall,
// dilations, padding on every side, channel counts across the sixteen-lane groups' tails, output
// rows across the four-output blocks' tails, u8 / s8 outputs with per-tensor and per-channel
// scales, weights at -128 with activations at 255, on one thread and on two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/qgemm/qconv_depthwise_nhwc.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ScopedThreads;

struct DepthwiseCase {
  int64_t ih, iw, channels, kh, kw, sh, sw, dh, dw, padTop, padLeft, padBottom, padRight;
  DataType out = DataType::kUint8;
  bool perChannel = false;
  int xZero = 0;
  bool extremes = false;  // weights -128 and activations 255 everywhere
};

std::string describe(const DepthwiseCase& c, int threads) {
  return std::to_string(c.ih) + "x" + std::to_string(c.iw) + "x" + std::to_string(c.channels) +
         " kernel " + std::to_string(c.kh) + "x" + std::to_string(c.kw) + " stride " +
         std::to_string(c.sh) + "," + std::to_string(c.sw) + " dilation " + std::to_string(c.dh) +
         "," + std::to_string(c.dw) + " pads " + std::to_string(c.padTop) + "," +
         std::to_string(c.padLeft) + "," + std::to_string(c.padBottom) + "," +
         std::to_string(c.padRight) + " out " + dataTypeName(c.out) +
         (c.perChannel ? " per-channel" : "") + " x zero " + std::to_string(c.xZero) + " threads " +
         std::to_string(threads);
}

void runCase(const DepthwiseCase& c, int threads) {
  SCOPED_TRACE(describe(c, threads));
  const int64_t oh = (c.ih + c.padTop + c.padBottom - (c.kh - 1) * c.dh - 1) / c.sh + 1;
  const int64_t ow = (c.iw + c.padLeft + c.padRight - (c.kw - 1) * c.dw - 1) / c.sw + 1;
  const int64_t taps = c.kh * c.kw;
  std::mt19937 rng(static_cast<uint32_t>(c.ih * 131 + c.channels * 7 + c.kw));
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> x(static_cast<size_t>(c.ih * c.iw * c.channels));
  for (auto& v : x) v = c.extremes ? 255 : static_cast<uint8_t>(byte(rng));
  std::vector<int8_t> w(static_cast<size_t>(c.channels * taps));  // [channel][ky][kx]
  for (auto& v : w) v = c.extremes ? -128 : static_cast<int8_t>(byte(rng) - 128);
  std::vector<int32_t> bias(static_cast<size_t>(c.channels));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int32_t>(i * 377) - 3000;
  std::vector<float> scales(c.perChannel ? static_cast<size_t>(c.channels) : 1);
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = 0.0004f * static_cast<float>(i % 13 + 1) + 0.0001f;
  const int32_t yZero = c.out == DataType::kInt8 ? -3 : 17;
  const int32_t lowest = c.out == DataType::kInt8 ? -100 : 5,
                highest = c.out == DataType::kInt8 ? 120 : 250;

  const size_t cells = static_cast<size_t>(oh * ow * c.channels);
  std::vector<int32_t> expect(cells);
  std::vector<int32_t> channelAdd(static_cast<size_t>(c.channels));
  for (int64_t ch = 0; ch < c.channels; ++ch) {
    int32_t sum = 0;
    for (int64_t t = 0; t < taps; ++t) sum += w[static_cast<size_t>(ch * taps + t)];
    channelAdd[static_cast<size_t>(ch)] = bias[static_cast<size_t>(ch)] - c.xZero * sum;
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t acc = bias[static_cast<size_t>(ch)];
        for (int64_t ky = 0; ky < c.kh; ++ky) {
          for (int64_t kx = 0; kx < c.kw; ++kx) {
            const int64_t iy = oy * c.sh - c.padTop + ky * c.dh;
            const int64_t ix = ox * c.sw - c.padLeft + kx * c.dw;
            if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) continue;  // (zp - zp) * w
            const int32_t xv = x[static_cast<size_t>((iy * c.iw + ix) * c.channels + ch)];
            acc += static_cast<int64_t>(xv - c.xZero) *
                   w[static_cast<size_t>(ch * taps + ky * c.kw + kx)];
          }
        }
        const float s = scales[c.perChannel ? static_cast<size_t>(ch) : 0];
        expect[static_cast<size_t>((oy * ow + ox) * c.channels + ch)] =
            std::clamp(static_cast<int32_t>(std::nearbyint(static_cast<float>(acc) * s)) + yZero,
                       lowest, highest);
      }
    }
  }

  const std::vector<int8_t> packed = packDepthwiseNhwcWeights(w.data(), c.channels, c.kh, c.kw);
  ScopedThreads pool(threads);
  QConvDepthwiseNhwcProblem p;
  p.x = x.data();
  p.ih = c.ih, p.iw = c.iw, p.channels = c.channels;
  p.oh = oh, p.ow = ow, p.kh = c.kh, p.kw = c.kw, p.sh = c.sh, p.sw = c.sw, p.dh = c.dh,
  p.dw = c.dw, p.padTop = c.padTop, p.padLeft = c.padLeft;
  p.xZero = static_cast<uint8_t>(c.xZero);
  p.weights = packed.data();
  p.channelAdd = channelAdd.data();
  p.output.dtype = c.out;
  p.output.scale = scales.data();
  p.output.scaleCount = static_cast<int64_t>(scales.size());
  p.output.zeroPoint = yZero;
  p.output.lowest = lowest;
  p.output.highest = highest;
  std::vector<uint8_t> workspace(qconvDepthwiseNhwcWorkspaceBytes(p, threads) + 64, 0xCD);
  void* ws = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
  std::vector<uint8_t> y(cells + 64, 0xAA);  // bytes past the output stay untouched
  p.y = y.data();
  qconvDepthwiseNhwc(p, ws);
  std::vector<int32_t> got(cells);
  for (size_t i = 0; i < cells; ++i)
    got[i] = c.out == DataType::kInt8 ? static_cast<int8_t>(y[i]) : y[i];
  ASSERT_EQ(got, expect);
  for (size_t i = cells; i < y.size(); ++i) ASSERT_EQ(y[i], 0xAA) << "written past the output";
}

class QConvDepthwiseNhwc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!qconvDepthwiseNhwcAvailable()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  }
};

TEST_F(QConvDepthwiseNhwc, MatchesNaiveLoopAcrossGeometries) {
  const std::vector<DepthwiseCase> cases = {
      // ih iw  C  kh kw sh sw dh dw pt pl pb pr
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // MobileNet's stride 1
      {13, 13, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2, odd size
      {7, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // a lane group of one channel
      {9, 10, 40, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},   // dilation 2
      {6, 11, 24, 5, 4, 1, 2, 1, 1, 2, 3, 2, 0},   // 4 wide, 5 tall, uneven pads
      {8, 5, 16, 2, 1, 3, 1, 1, 1, 0, 0, 1, 0},    // 1 wide, row stride 3
      {3, 3, 8, 4, 4, 1, 1, 1, 1, 3, 3, 3, 3},     // taps mostly in the padding
      {5, 30, 3, 3, 2, 1, 1, 1, 3, 1, 1, 1, 1},    // 3 channels, horizontal dilation 3
  };
  for (const DepthwiseCase& base : cases) {
    for (int xZero : {0, 131, 255}) {
      DepthwiseCase c = base;
      c.xZero = xZero;
      runCase(c, 1);
      runCase(c, 2);
    }
  }
}

TEST_F(QConvDepthwiseNhwc, RequantizesWithPerTensorAndPerChannelScales) {
  for (DataType out : {DataType::kUint8, DataType::kInt8}) {
    for (bool perChannel : {false, true}) {
      DepthwiseCase c{10, 10, 50, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
      c.out = out;
      c.perChannel = perChannel;
      c.xZero = 100;
      runCase(c, 1);
      runCase(c, 2);
    }
  }
}

TEST_F(QConvDepthwiseNhwc, WeightsAtMinus128AndActivationsAt255SumExactly) {
  DepthwiseCase c{6, 6, 48, 5, 4, 1, 1, 1, 1, 2, 2, 2, 2};
  c.extremes = true;
  runCase(c, 1);
}

}  // namespace
}  // namespace kiln::cpu
