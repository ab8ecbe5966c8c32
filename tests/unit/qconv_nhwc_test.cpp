// The direct NHWC 8-bit convolution (backends/cpu/qgemm/qconv_nhwc.h) against a naive integer
// loop, bit for bit: padding on every side, strides, dilations, 1x1 and 7x7 kernels, pixel counts
// across the 8-row tile's tails, output channels across the 32-column strip's tails, s8 weights
// at -128 with activations at 255, int32 / u8 / s8 / float32 outputs with per-tensor and
// per-channel scales, on one thread and on two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/qgemm/qconv_nhwc.h"
#include "scoped_threads.h"

namespace kiln::cpu {
namespace {

using kiln::testing::ScopedThreads;

struct ConvCase {
  int64_t ih, iw, channels, outChannels, kh, kw, sh, sw, dh, dw, padTop, padLeft, padBottom,
      padRight;
  DataType out = DataType::kInt32;
  bool perChannel = false;
  int xZero = 0;
  bool extremes = false;  // weights -128 and activations 255 everywhere
};

std::string describe(const ConvCase& c, int threads) {
  return std::to_string(c.ih) + "x" + std::to_string(c.iw) + "x" + std::to_string(c.channels) +
         " -> " + std::to_string(c.outChannels) + " kernel " + std::to_string(c.kh) + "x" +
         std::to_string(c.kw) + " stride " + std::to_string(c.sh) + "," + std::to_string(c.sw) +
         " dilation " + std::to_string(c.dh) + "," + std::to_string(c.dw) + " pads " +
         std::to_string(c.padTop) + "," + std::to_string(c.padLeft) + "," +
         std::to_string(c.padBottom) + "," + std::to_string(c.padRight) + " out " +
         dataTypeName(c.out) + (c.perChannel ? " per-channel" : "") + " threads " +
         std::to_string(threads);
}

void runCase(const ConvCase& c, int threads) {
  SCOPED_TRACE(describe(c, threads));
  const int64_t oh = (c.ih + c.padTop + c.padBottom - (c.kh - 1) * c.dh - 1) / c.sh + 1;
  const int64_t ow = (c.iw + c.padLeft + c.padRight - (c.kw - 1) * c.dw - 1) / c.sw + 1;
  const int64_t taps = c.kh * c.kw, depth = taps * c.channels;
  std::mt19937 rng(static_cast<uint32_t>(c.ih * 131 + c.channels * 7 + c.outChannels));
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> x(static_cast<size_t>(c.ih * c.iw * c.channels));
  for (auto& v : x) v = c.extremes ? 255 : static_cast<uint8_t>(byte(rng));
  // W as [out channel][tap][channel], s8.
  std::vector<int8_t> w(static_cast<size_t>(c.outChannels * depth));
  for (auto& v : w) v = c.extremes ? -128 : static_cast<int8_t>(byte(rng) - 128);
  std::vector<int32_t> bias(static_cast<size_t>(c.outChannels));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int32_t>(i * 977) - 5000;
  std::vector<float> scales(c.perChannel ? static_cast<size_t>(c.outChannels) : 1);
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = 0.00007f * static_cast<float>(i + 1) + 0.00003f;
  std::vector<float> floatBias(static_cast<size_t>(c.outChannels));
  for (size_t i = 0; i < floatBias.size(); ++i)
    floatBias[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  const int32_t yZero = c.out == DataType::kInt8 ? -3 : 17;
  const int32_t lowest = c.out == DataType::kInt8 ? -100 : 5,
                highest = c.out == DataType::kInt8 ? 120 : 250;

  const size_t cells = static_cast<size_t>(oh * ow * c.outChannels);
  std::vector<int32_t> expectInt(cells), expectQ(cells);
  std::vector<float> expectFloat(cells);
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      for (int64_t co = 0; co < c.outChannels; ++co) {
        int64_t acc = bias[static_cast<size_t>(co)];
        for (int64_t ky = 0; ky < c.kh; ++ky) {
          for (int64_t kx = 0; kx < c.kw; ++kx) {
            const int64_t iy = oy * c.sh - c.padTop + ky * c.dh;
            const int64_t ix = ox * c.sw - c.padLeft + kx * c.dw;
            if (iy < 0 || iy >= c.ih || ix < 0 || ix >= c.iw) continue;  // (zp - zp) * w
            for (int64_t ci = 0; ci < c.channels; ++ci) {
              const int32_t xv = x[static_cast<size_t>((iy * c.iw + ix) * c.channels + ci)];
              const int32_t wv =
                  w[static_cast<size_t>((co * taps + ky * c.kw + kx) * c.channels + ci)];
              acc += static_cast<int64_t>(xv - c.xZero) * wv;
            }
          }
        }
        const size_t i = static_cast<size_t>((oy * ow + ox) * c.outChannels + co);
        expectInt[i] = static_cast<int32_t>(acc);
        const float s = scales[c.perChannel ? static_cast<size_t>(co) : 0];
        expectFloat[i] = std::max(
            std::fma(static_cast<float>(expectInt[i]), s, floatBias[static_cast<size_t>(co)]),
            0.0f);
        expectQ[i] = std::clamp(
            static_cast<int32_t>(std::nearbyint(static_cast<float>(expectInt[i]) * s)) + yZero,
            lowest, highest);
      }
    }
  }

  const PackedQMatrix packed = packQWeights(QSide::kRight, CpuIsa::kAvx512Vnni, c.outChannels,
                                            depth, {w.data(), depth, 1, true});
  std::vector<int32_t> channelAdd(static_cast<size_t>(c.outChannels));
  for (int64_t co = 0; co < c.outChannels; ++co) {
    channelAdd[static_cast<size_t>(co)] =
        bias[static_cast<size_t>(co)] - c.xZero * packed.sums()[co];
  }
  ScopedThreads pool(threads);
  QConvNhwcProblem p;
  p.x = x.data();
  p.ih = c.ih, p.iw = c.iw, p.channels = c.channels;
  p.oh = oh, p.ow = ow, p.kh = c.kh, p.kw = c.kw, p.sh = c.sh, p.sw = c.sw, p.dh = c.dh,
  p.dw = c.dw, p.padTop = c.padTop, p.padLeft = c.padLeft;
  p.xZero = static_cast<uint8_t>(c.xZero);
  p.weights = &packed;
  p.channelAdd = channelAdd.data();
  p.output.dtype = c.out;
  p.output.scale = scales.data();
  p.output.scaleCount = static_cast<int64_t>(scales.size());
  p.output.zeroPoint = yZero;
  p.output.lowest = lowest;
  p.output.highest = highest;
  p.output.floatLowest = 0.0f;
  p.output.floatBias = floatBias.data();
  std::vector<uint8_t> workspace(qconvNhwcWorkspaceBytes(taps, c.channels, threads) + 64);
  void* ws = workspace.data() + (64 - reinterpret_cast<uintptr_t>(workspace.data()) % 64) % 64;
  switch (c.out) {
    case DataType::kInt32: {
      std::vector<int32_t> y(cells, -7);
      p.y = y.data();
      qconvNhwc(p, ws);
      ASSERT_EQ(y, expectInt);
      break;
    }
    case DataType::kFloat32: {
      std::vector<float> y(cells, -7.0f);
      p.y = y.data();
      qconvNhwc(p, ws);
      ASSERT_EQ(y, expectFloat);
      break;
    }
    default: {
      std::vector<uint8_t> y(cells, 0xAA);
      p.y = y.data();
      qconvNhwc(p, ws);
      std::vector<int32_t> got(cells);
      for (size_t i = 0; i < cells; ++i)
        got[i] = c.out == DataType::kInt8 ? static_cast<int8_t>(y[i]) : y[i];
      ASSERT_EQ(got, expectQ);
    }
  }
}

class QConvNhwc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!qconvNhwcAvailable()) GTEST_SKIP() << "no AVX512-VNNI on this CPU";
  }
};

TEST_F(QConvNhwc, MatchesNaiveLoopAcrossGeometries) {
  const std::vector<ConvCase> cases = {
      // ih iw  C  Cout kh kw sh sw dh dw pt pl pb pr
      {1, 1, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {7, 7, 64, 96, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // 49 pixels: tails of 8 rows
      {5, 9, 8, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // 33 channels: a strip of 1
      {14, 14, 16, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2
      {9, 11, 12, 40, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},   // dilation 2
      {11, 13, 4, 31, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},   // first-layer-like 7x7
      {6, 6, 20, 17, 3, 2, 1, 3, 1, 1, 0, 2, 1, 0},    // uneven kernel, stride, pads
      {3, 3, 8, 8, 5, 5, 1, 1, 1, 1, 4, 4, 4, 4},      // taps mostly in the padding
      {8, 8, 32, 64, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},    // strided 1x1 (ResNet's downsample)
  };
  for (const ConvCase& base : cases) {
    for (int xZero : {0, 131, 255}) {
      ConvCase c = base;
      c.xZero = xZero;
      runCase(c, 1);
      runCase(c, 2);
    }
  }
}

TEST_F(QConvNhwc, RequantizesAndDequantizesWithPerTensorAndPerChannelScales) {
  for (DataType out : {DataType::kUint8, DataType::kInt8, DataType::kFloat32}) {
    for (bool perChannel : {false, true}) {
      ConvCase c{10, 10, 24, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
      c.out = out;
      c.perChannel = perChannel;
      c.xZero = 100;
      runCase(c, 1);
      runCase(c, 2);
    }
  }
}

TEST_F(QConvNhwc, WeightsAtMinus128AndActivationsAt255SumExactly) {
  ConvCase c{6, 6, 256, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  c.extremes = true;
  runCase(c, 1);
}

}  // namespace
}  // namespace kiln::cpu
