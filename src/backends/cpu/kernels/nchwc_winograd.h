// Winograd convolution in the blocked NCHWc layout (ir/ops/nchwc.h) for 3x3, stride-1, dilation-1,
// group-1 convolutions, run by kiln::NchwcConv in place of its direct convolution where it is
// faster (nchwcWinogradTile). Each m x m output tile (m = 2 or 4) of each output channel is
//   Y = A^T [ sum_ci (G g G^T) .* (B^T d B) ] A
// over the (m + 2) x (m + 2) input tile d: (m + 2)^2 products per channel pair and tile instead
// of 9 m^2 (F(4x4,3x3): 36 for 144, F(2x2,3x3): 16 for 36). In the blocked layout every transform
// is adds and multiplies of whole 16-channel vectors, and for each of the (m + 2)^2 positions the
// sum over input channels is a 1x1 blocked convolution whose "pixels" are the tiles.
//
// Packed weights: for each position, the output blocks in the groups of nchwcOutBlockGroup (as the
// direct kernel), group b0 .. b0+M-1 laid out [ci][M][16] over the Ci real input channels;
// position stride outBlocks * 16 * Ci floats. Output channels past Co get zero weights. The BF16
// packing (layers marked bf16) is the same with each two input channels in one 32-bit lane of
// BF16s, the even one in the low half: [pair][M][16] over ceil(Ci / 2) pairs (an odd Ci's last
// pair has a zero high half).
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/kernels/nchwc_conv.h"
#include "core/internal_api.h"
#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::cpu {

/// The transformed, packed weights of one convolution; empty (data null) when it runs direct.
struct NchwcWinogradWeights {
  std::shared_ptr<float> data;
  int64_t floats = 0;  // 4-byte words: floats, or pairs of BF16 where bf16
  int tile = 0;        // the output tile size m: 2 or 4
  int64_t inChannels = 0, outChannels = 0;
  bool bf16 = false;  // the BF16 packing, run by the BF16 kernel (AVX512_BF16)
};

/// The output tile size (4 or 2) Winograd should use for a 3x3 stride-1 group-1 convolution with
/// this output size on this CPU, or 0 where the direct convolution is faster (see the .cpp).
KILN_INTERNAL_API int nchwcWinogradTile(int64_t outHeight, int64_t outWidth);

/// Transforms W [Co, Ci, 3, 3] to G g G^T for tile m (2 or 4) and packs it as described above.
KILN_INTERNAL_API NchwcWinogradWeights packNchwcWinogradWeights(const float* w, int64_t outChannels,
                                                                int64_t inChannels, int tile);

/// The words of the packing of W [Co, Ci, 3, 3] for tile m: floats, or BF16 pairs where bf16.
KILN_INTERNAL_API int64_t nchwcWinogradWeightWords(int64_t outChannels, int64_t inChannels,
                                                   int tile, bool bf16);

/// The BF16 packing (above) of an FP32 one, rounded to nearest even.
KILN_INTERNAL_API NchwcWinogradWeights
packNchwcWinogradBf16Weights(const NchwcWinogradWeights& fp32);

/// Scratch bytes nchwcWinogradConv needs for this shape (batch, channels and output size) on a
/// pool of `threads` threads: one pass's transformed input, and each thread's products.
uint64_t nchwcWinogradWorkspaceBytes(const NchwcConvShape& shape,
                                     const NchwcWinogradWeights& weights, int threads);
/// The same for the current thread pool.
uint64_t nchwcWinogradWorkspaceBytes(const NchwcConvShape& shape,
                                     const NchwcWinogradWeights& weights);

/// y = act(conv(x, w) + bias + residual) as nchwcConv (args.weights is not used), for a blocked X
/// and a shape with a 3x3 kernel, stride 1 and dilation 1 (any padding and size), over the
/// current thread pool, in args.scratch (nchwcWinogradWorkspaceBytes; null: a buffer of its
/// own). Needs AVX-512 (nchwcWinogradTile is 0 without it), and AVX512_BF16 for BF16 weights.
KILN_INTERNAL_API void nchwcWinogradConv(const NchwcConvArgs& args,
                                         const NchwcWinogradWeights& weights);

namespace detail {
void nchwcWinogradAvx512(const NchwcConvArgs& args, const NchwcWinogradWeights& weights);
void nchwcWinogradBf16Avx512(const NchwcConvArgs& args, const NchwcWinogradWeights& weights);
/// nchwcWinogradWorkspaceBytes (nchwc_winograd_avx512.cpp knows the kernel's passes and bands).
uint64_t nchwcWinogradScratchBytes(const NchwcConvShape& shape, const NchwcWinogradWeights& weights,
                                   int threads);
}  // namespace detail

}  // namespace kiln::cpu
