// Tiles are processed in blocks sized so the transformed inputs V and products M of a block stay
// in cache between the input transform, the 16 GEMMs and the output transform.
#include "backends/cpu/kernels/conv_winograd.h"

#include <algorithm>

#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/thread_pool.h"
#include "core/aligned_memory.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlockBytes = int64_t{1} << 21;  // V and M of one tile block: ~2 MiB

// V = B^T d B for one 4x4 input tile d, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
inline void transformInputTile(const float d[4][4], float v[16]) {
  float t[4][4];
  for (int c = 0; c < 4; ++c) {
    t[0][c] = d[0][c] - d[2][c];
    t[1][c] = d[1][c] + d[2][c];
    t[2][c] = d[2][c] - d[1][c];
    t[3][c] = d[1][c] - d[3][c];
  }
  for (int r = 0; r < 4; ++r) {
    v[r * 4 + 0] = t[r][0] - t[r][2];
    v[r * 4 + 1] = t[r][1] + t[r][2];
    v[r * 4 + 2] = t[r][2] - t[r][1];
    v[r * 4 + 3] = t[r][1] - t[r][3];
  }
}

// Y = A^T m A for one tile, A^T = [1 1 1 0; 0 1 -1 -1].
inline void transformOutputTile(const float m[16], float y[2][2]) {
  float t[2][4];
  for (int c = 0; c < 4; ++c) {
    t[0][c] = m[0 * 4 + c] + m[1 * 4 + c] + m[2 * 4 + c];
    t[1][c] = m[1 * 4 + c] - m[2 * 4 + c] - m[3 * 4 + c];
  }
  for (int r = 0; r < 2; ++r) {
    y[r][0] = t[r][0] + t[r][1] + t[r][2];
    y[r][1] = t[r][1] - t[r][2] - t[r][3];
  }
}

}  // namespace

bool winogradApplies(const ir::ConvGeometry& g, int64_t group) {
  if (g.kernel.size() != 2 || g.kernel[0] != 3 || g.kernel[1] != 3 || group != 1) return false;
  if (g.strides[0] != 1 || g.strides[1] != 1 || g.dilations[0] != 1 || g.dilations[1] != 1)
    return false;
  return g.output[0] >= 2 && g.output[1] >= 2;
}

bool winogradPreferred(const ir::ConvGeometry& g, int64_t channels, int64_t outChannels) {
  // The transforms cost per channel what the 16 GEMMs cost per channel pair, so with few channels
  // im2col + GEMM wins: measured (BM_Conv3x3*, Sapphire Rapids, 1 thread) Winograd 6.9 vs 3.2 ms
  // at 64 channels 56x56, 4.2 vs 2.7 at 128 x 28x28, but 1.4 vs 2.7 at 256 x 14x14, 2.3 vs 3.3
  // at 512 x 7x7.
  return channels >= 256 && outChannels >= 256 && g.output[0] >= 4 && g.output[1] >= 4;
}

std::vector<float> winogradFilters(const float* w, int64_t outChannels, int64_t channels) {
  std::vector<float> u(static_cast<size_t>(16 * outChannels * channels));
  const int64_t plane = outChannels * channels;
  for (int64_t o = 0; o < outChannels; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const float* g = w + (o * channels + c) * 9;
      float t[4][3];  // G g, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
      for (int k = 0; k < 3; ++k) {
        t[0][k] = g[0 * 3 + k];
        t[1][k] = 0.5f * (g[0 * 3 + k] + g[1 * 3 + k] + g[2 * 3 + k]);
        t[2][k] = 0.5f * (g[0 * 3 + k] - g[1 * 3 + k] + g[2 * 3 + k]);
        t[3][k] = g[2 * 3 + k];
      }
      for (int r = 0; r < 4; ++r) {  // (G g) G^T
        float* dst = u.data() + o * channels + c;
        dst[(r * 4 + 0) * plane] = t[r][0];
        dst[(r * 4 + 1) * plane] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
        dst[(r * 4 + 2) * plane] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
        dst[(r * 4 + 3) * plane] = t[r][2];
      }
    }
  }
  return u;
}

WinogradWeights packWinogradFilters(const float* w, int64_t outChannels, int64_t channels,
                                    CpuIsa isa) {
  const std::vector<float> u = winogradFilters(w, outChannels, channels);
  WinogradWeights packed;
  packed.u.reserve(16);
  for (int xi = 0; xi < 16; ++xi) {
    packed.u.push_back(
        packA(false, outChannels, channels, u.data() + xi * outChannels * channels, channels, isa));
  }
  return packed;
}

namespace {

// Tiles transformed and multiplied together: V and M of one block stay about kBlockBytes.
int64_t tileBlock(int64_t tiles, int64_t channels, int64_t outChannels) {
  return std::clamp<int64_t>(kBlockBytes / (64 * (channels + outChannels)), 8, tiles);
}

int64_t tileCount(const ir::ConvGeometry& g) {
  return (g.output[0] + 1) / 2 * ((g.output[1] + 1) / 2);
}

// The workspace: V [16][channels][block], then M [16][outChannels][block], then the GEMMs'.
struct WinogradScratch {
  uint64_t vBytes, mBytes;
};

WinogradScratch winogradScratch(int64_t channels, int64_t outChannels, int64_t block) {
  return {cacheLineBytes(static_cast<uint64_t>(16 * channels * block) * sizeof(float)),
          cacheLineBytes(static_cast<uint64_t>(16 * outChannels * block) * sizeof(float))};
}

}  // namespace

uint64_t winogradWorkspaceBytes(const ir::ConvGeometry& g, int64_t channels, int64_t outChannels,
                                CpuIsa isa, int threads) {
  if (g.output.size() != 2 || g.output[0] <= 0 || g.output[1] <= 0) return 0;
  const int64_t block = tileBlock(tileCount(g), channels, outChannels);
  const WinogradScratch s = winogradScratch(channels, outChannels, block);
  const PackedMatrix u =
      PackedMatrix::view(PackedMatrix::Side::kA, isa, outChannels, channels, nullptr);
  return s.vBytes + s.mBytes + sgemmWorkspaceBytes(u, block, threads);
}

void winogradConv2d(const ir::ConvGeometry& g, int64_t batch, int64_t channels, int64_t height,
                    int64_t width, int64_t outChannels, const float* x,
                    const WinogradWeights& filters, float* y, void* workspace,
                    const WinogradEpilogue& epilogue) {
  const bool finish =
      epilogue.bias || epilogue.residual || epilogue.act.kind != ActivationKind::kNone;
  const int64_t outH = g.output[0], outW = g.output[1];
  const int64_t tilesX = (outW + 1) / 2, tiles = tileCount(g);
  const int64_t padTop = g.padsBegin[0], padLeft = g.padsBegin[1];
  const int64_t block = tileBlock(tiles, channels, outChannels);
  const WinogradScratch scratch = winogradScratch(channels, outChannels, block);
  auto* base = static_cast<uint8_t*>(workspace);
  float* v = reinterpret_cast<float*>(base);
  float* m = reinterpret_cast<float*>(base + scratch.vBytes);
  void* gemmWs = base + scratch.vBytes + scratch.mBytes;
  for (int64_t n = 0; n < batch; ++n) {
    const float* image = x + n * channels * height * width;
    float* out = y + n * outChannels * outH * outW;
    const float* residual =
        epilogue.residual ? epilogue.residual + n * outChannels * outH * outW : nullptr;
    for (int64_t t0 = 0; t0 < tiles; t0 += block) {
      const int64_t count = std::min(block, tiles - t0);
      parallelFor(channels, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const float* src = image + c * height * width;
          for (int64_t t = 0; t < count; ++t) {
            const int64_t ty = (t0 + t) / tilesX, tx = (t0 + t) % tilesX;
            const int64_t iy0 = ty * 2 - padTop, ix0 = tx * 2 - padLeft;
            float d[4][4];
            for (int r = 0; r < 4; ++r) {
              const int64_t iy = iy0 + r;
              for (int k = 0; k < 4; ++k) {
                const int64_t ix = ix0 + k;
                d[r][k] =
                    iy >= 0 && iy < height && ix >= 0 && ix < width ? src[iy * width + ix] : 0.0f;
              }
            }
            float tv[16];
            transformInputTile(d, tv);
            for (int xi = 0; xi < 16; ++xi) v[(xi * channels + c) * block + t] = tv[xi];
          }
        }
      });
      for (int xi = 0; xi < 16; ++xi) {
        sgemmPacked(filters.u[xi], count, 1.0f, false, v + xi * channels * block, block, 0.0f,
                    m + xi * outChannels * block, block, gemmWs);
      }
      parallelFor(outChannels, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          float* dst = out + o * outH * outW;
          for (int64_t t = 0; t < count; ++t) {
            float mt[16];
            for (int xi = 0; xi < 16; ++xi) mt[xi] = m[(xi * outChannels + o) * block + t];
            float yt[2][2];
            transformOutputTile(mt, yt);
            const int64_t oy = (t0 + t) / tilesX * 2, ox = (t0 + t) % tilesX * 2;
            for (int r = 0; r < 2 && oy + r < outH; ++r) {
              for (int k = 0; k < 2 && ox + k < outW; ++k) dst[(oy + r) * outW + ox + k] = yt[r][k];
            }
          }
          // The output rows whose tiles all lie in blocks done so far and not in earlier ones.
          const int64_t rowBegin = t0 / tilesX * 2;
          const int64_t rowEnd =
              t0 + count == tiles ? outH : std::min(outH, (t0 + count) / tilesX * 2);
          if (finish && rowEnd > rowBegin) {
            applyEpilogue(epilogue.act, dst + rowBegin * outW, (rowEnd - rowBegin) * outW,
                          epilogue.bias ? epilogue.bias[o] : 0.0f,
                          residual ? residual + o * outH * outW + rowBegin * outW : nullptr);
          }
        }
      });
    }
  }
}

}  // namespace kiln::cpu
