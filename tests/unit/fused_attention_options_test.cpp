// fusedAttention's options (fused_attention.h), the KV-cache ops' attention: strided BNSH heads in
// a longer buffer, grouped KV heads, per-row key ranges, softcap, sinks, an additive mask and the
// qk output, checked against a direct double-precision loop across shapes that cross the kernel's
// 64-row block, on one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/fused_attention.h"
#include "scoped_threads.h"

namespace kiln {
namespace {

struct OptionsCase {
  int64_t B, Sq, Sk, H, group, Dk, Dv, capacity;  // capacity: the K / V buffer's rows (>= Sk)
  float softcap;
  bool sinks, ranges, mask, qkAfterSoftmax;
};

std::vector<float> randoms(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

void checkCase(const OptionsCase& c, int threads) {
  std::mt19937 gen(7);
  const int64_t B = c.B, Sq = c.Sq, Sk = c.Sk, H = c.H, Hkv = c.H / c.group, M = c.capacity;
  const std::vector<float> q = randoms(B * Sq * H * c.Dk, gen);   // [B, Sq, H, Dk]
  const std::vector<float> k = randoms(B * Hkv * M * c.Dk, gen);  // [B, Hkv, M, Dk]
  const std::vector<float> v = randoms(B * Hkv * M * c.Dv, gen);
  const std::vector<float> sinks = randoms(H, gen);
  std::vector<int64_t> begin(B * Sq), end(B * Sq);
  for (int64_t i = 0; i < B * Sq; ++i) {  // causal with a window of 5, offset per batch entry
    end[i] = std::min<int64_t>(Sk, i % Sq + 1 + (i / Sq) * 2);
    begin[i] = std::max<int64_t>(0, end[i] - 5);
  }
  Tensor mask(DataType::kFloat32, Shape{B, 1, Sq, Sk});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = (i % 3 == 0) ? -2.0f : 0.5f;

  cpu::AttentionOperands o{q.data(), k.data(), v.data(), H * c.Dk, c.Dk, c.Dv,
                           B,        Sq,       Sk,       H,        c.Dk, c.Dv};
  o.kHead = M * c.Dk, o.kBatch = Hkv * M * c.Dk, o.vHead = M * c.Dv, o.vBatch = Hkv * M * c.Dv;
  o.kvGroup = c.group;
  std::vector<float> qk(B * H * Sq * Sk, -1.0f);
  cpu::AttentionOptions options;
  options.softcap = c.softcap;
  options.smoothSoftmax = c.sinks;
  options.sinks = c.sinks ? sinks.data() : nullptr;
  options.keyBegin = c.ranges ? begin.data() : nullptr;
  options.keyEnd = c.ranges ? end.data() : nullptr;
  options.qk = qk.data();
  options.qkAfterSoftmax = c.qkAfterSoftmax;
  const float scale = 0.3f;

  ir::Node node;
  node.opType = "FusedAttentionOptionsTest";
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> types(1, ir::TypeInfo{DataType::kFloat32, {}});
  cpu::KernelContext ctx(node, {}, outputs, types);
  Tensor y(DataType::kFloat32, Shape{B, Sq, H, c.Dv});
  {
    testing::ScopedThreads pool(threads);
    cpu::fusedAttention(ctx, o, c.mask ? &mask : nullptr, scale, y, options);
  }

  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kvh = h / c.group;
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t first = c.ranges ? begin[b * Sq + i] : 0,
                      last = c.ranges ? end[b * Sq + i] : Sk;
        std::vector<double> s(Sk, 0.0), p(Sk, 0.0);
        double max = c.sinks ? sinks[h] : -INFINITY;
        for (int64_t j = first; j < last; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dk; ++d)
            dot += double(q[((b * Sq + i) * H + h) * c.Dk + d]) *
                   k[((b * Hkv + kvh) * M + j) * c.Dk + d];
          dot *= scale;
          if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
          if (c.mask) dot += mask.data<float>()[(b * Sq + i) * Sk + j];
          s[j] = dot;
          max = std::max(max, dot);
        }
        double sum = c.sinks ? std::exp(sinks[h] - max) : 0.0;
        for (int64_t j = first; j < last; ++j) sum += p[j] = std::exp(s[j] - max);
        for (int64_t j = first; j < last; ++j) p[j] /= sum;
        for (int64_t j = 0; j < Sk; ++j) {
          const double want = c.qkAfterSoftmax ? p[j] : s[j];
          ASSERT_NEAR(qk[((b * H + h) * Sq + i) * Sk + j], want,
                      1e-4 * std::max(1.0, std::fabs(want)))
              << "qk at b " << b << " h " << h << " i " << i << " j " << j;
        }
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = first; j < last; ++j)
            acc += p[j] * v[((b * Hkv + kvh) * M + j) * c.Dv + d];
          ASSERT_NEAR(y.data<float>()[((b * Sq + i) * H + h) * c.Dv + d], acc, 1e-4)
              << "y at b " << b << " h " << h << " i " << i << " d " << d;
        }
      }
    }
  }
}

TEST(FusedAttentionOptions, MatchTheDirectLoopAcrossShapes) {
  const OptionsCase cases[] = {
      {2, 5, 7, 4, 2, 8, 8, 9, 0.0f, false, true, false, false},
      {2, 5, 7, 4, 2, 8, 8, 9, 2.0f, true, true, true, false},
      {1, 70, 70, 2, 1, 16, 8, 80, 0.0f, false, true, true, true},
      {2, 1, 33, 6, 3, 8, 5, 40, 3.0f, true, false, false, true},
      {1, 3, 1, 2, 2, 4, 4, 1, 0.0f, true, false, true, false},
  };
  for (const OptionsCase& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE("Sq " + std::to_string(c.Sq) + " Sk " + std::to_string(c.Sk) + " threads " +
                   std::to_string(threads));
      checkCase(c, threads);
    }
  }
}

}  // namespace
}  // namespace kiln
