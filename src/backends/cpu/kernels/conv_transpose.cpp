// CPU kernels for ConvTranspose: per image and group, GEMM with the transposed weight into columns,
// then col2im scatters the columns onto the output (pointwise cases write the output directly).
// Layers marked bf16 (group 1, constant W) take bf16_conv_transpose_gemm_avx512bf16 first: the
// same with W^T packed once in BF16 (bf16_candidates.h).
#include <memory>
#include <type_traits>

#include "backends/cpu/gemm/float_copy.h"
#include "backends/cpu/gemm/im2col.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/kernels/bf16_candidates.h"
#include "backends/cpu/kernels/node_label.h"
#include "core/aligned_memory.h"
#include "ir/node_attrs.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {
namespace {

bool writesOutputDirectly(const ir::ConvGeometry& g, const Shape& imageShape) {
  for (size_t d = 0; d < g.kernel.size(); ++d) {
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padsBegin[d] != 0 ||
        g.output[d] != imageShape[d])
      return false;
  }
  return true;
}

// The scratch of one run: the column buffer (none when the GEMM writes the output directly),
// then the GEMM's packing; X [N, C, spatial...], W [C, C_out / group, kernel...].
struct ConvTransposeScratch {
  uint64_t columnBytes = 0, gemmBytes = 0;
};

// `packed`, when given, is a BF16 kernel's W^T (group 1): its GEMM's scratch instead.
template <typename T>
ConvTransposeScratch convTransposeScratch(const ir::ConvGeometry& g, int64_t group, const Shape& x,
                                          const Shape& w, int threads,
                                          const PackedBf16Matrix* packed = nullptr) {
  const Shape imageShape(x.begin() + 2, x.end());
  const int64_t imageSize = shapeNumel(imageShape);
  const int64_t rows = w[1] * shapeNumel(g.kernel);
  ConvTransposeScratch s;
  if (!writesOutputDirectly(g, imageShape))
    s.columnBytes = cacheLineBytes(static_cast<uint64_t>(rows * imageSize) * sizeof(T));
  s.gemmBytes = packed ? bf16GemmWorkspaceBytes(*packed, imageSize)
                       : gemmWorkspaceBytes<T>(rows, imageSize, x[1] / group, threads);
  return s;
}

// With `packed` (a BF16 kernel's W^T, group 1, T float) the products run in BF16.
template <typename T>
void convolveTransposed(KernelContext& ctx, const ir::ConvGeometry& g, int64_t group,
                        const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                        const PackedBf16Matrix* packed = nullptr) {
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const int64_t groupChannels = channels / group, groupOut = w.dim(1),
                outChannels = groupOut * group;
  const Shape imageShape(x.shape().begin() + 2, x.shape().end());
  const Shape& outShape = g.output;
  const int64_t imageSize = shapeNumel(imageShape), outSize = shapeNumel(outShape);
  const int64_t rows = groupOut * shapeNumel(g.kernel);  // one column row per (output channel, tap)
  const bool direct = writesOutputDirectly(g, imageShape);
  // Every column is written by the GEMM before it is read, so the workspace needs no zeroing.
  const ConvTransposeScratch scratch =
      convTransposeScratch<T>(g, group, x.shape(), w.shape(), poolThreads(), packed);
  auto* ws = static_cast<uint8_t*>(ctx.workspace(scratch.columnBytes + scratch.gemmBytes));
  T* col = reinterpret_cast<T*>(ws);
  void* gemmWs = ws ? ws + scratch.columnBytes : nullptr;
  const T* px = x.data<T>();
  const T* pw = w.data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  T* py = y.data<T>();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t gi = 0; gi < group; ++gi) {
      const T* image = px + (n * channels + gi * groupChannels) * imageSize;
      const T* weights = pw + gi * groupChannels * rows;  // [groupChannels, rows]
      T* out = py + (n * outChannels + gi * groupOut) * outSize;
      for (int64_t m = 0; m < groupOut; ++m) {
        std::fill(out + m * outSize, out + (m + 1) * outSize, pb ? pb[gi * groupOut + m] : T(0));
      }
      // The columns W^T X (rows x imageSize), added onto the bias where they are the output.
      T* dst = direct ? out : col;
      const T beta = direct ? T(1) : T(0);
      if constexpr (std::is_same_v<T, float>) {
        if (packed) {
          bf16GemmPacked(*packed, imageSize, false, image, imageSize, beta, dst, imageSize, gemmWs);
        } else {
          gemm<T>(true, false, rows, imageSize, groupChannels, T(1), weights, rows, image,
                  imageSize, beta, dst, imageSize, gemmWs);
        }
      } else {
        gemm<T>(true, false, rows, imageSize, groupChannels, T(1), weights, rows, image, imageSize,
                beta, dst, imageSize, gemmWs);
      }
      if (!direct) col2imAdd(col, groupOut, outShape, imageShape, g, out);
    }
  }
}

struct ConvTransposeAttrs {
  ir::Node
      geometry;  // label with the attributes ir::convTransposeGeometry reads at each run's sizes
  int64_t group = 1;
};

ConvTransposeAttrs convTransposeAttrs(const ir::Node& node) {
  return {nodeLabelWithAttrs(node, {"kernel_shape", "strides", "dilations", "pads", "auto_pad",
                                    "output_padding", "output_shape"}),
          ir::attrInt(node, "group", 1)};
}

ir::ConvGeometry geometryOf(const ConvTransposeAttrs& attrs, const Shape& x, const Shape& w) {
  return ir::convTransposeGeometry(attrs.geometry, Shape(x.begin() + 2, x.end()),
                                   Shape(w.begin() + 2, w.end()));
}

void convTransposeKernel(KernelContext& ctx, const ConvTransposeAttrs& attrs,
                         const PackedBf16Matrix* packed = nullptr) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.hasInput(2) ? &ctx.input(2) : nullptr;
  const int64_t group = attrs.group;
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail("X and W must have the same rank >= 3", ErrorCode::kInvalidArgument);
  if (group <= 0 || x.dim(1) != w.dim(0) || x.dim(1) % group != 0) {
    ctx.fail("channels of X " + x.describe() + " and W " + w.describe() + " do not fit group " +
                 std::to_string(group),
             ErrorCode::kInvalidArgument);
  }
  if (bias && bias->numel() != w.dim(1) * group) {
    ctx.fail("B must have one value per output channel", ErrorCode::kInvalidArgument);
  }
  const ir::ConvGeometry g = geometryOf(attrs, x.shape(), w.shape());
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  if (packed) return convolveTransposed<float>(ctx, g, group, x, w, bias, y, packed);
  runConvolutionInFloat(
      x, w, bias, y, "ConvTranspose",
      [&](auto tag, const Tensor& fx, const Tensor& fw, const Tensor* fb, Tensor& fy) {
        convolveTransposed<typename decltype(tag)::type>(ctx, g, group, fx, fw, fb, fy);
      });
}

Kernel makeConvTransposeKernel(const KernelCreateInfo& info) {
  const ConvTransposeAttrs attrs = convTransposeAttrs(info.node);
  const ir::TypeInfo* t = info.inputTypes.empty() ? nullptr : info.inputTypes[0];
  const bool wide = t && t->dtype == DataType::kFloat64;  // double math; the rest in float
  return {[attrs](KernelContext& ctx) { convTransposeKernel(ctx, attrs); },
          [attrs, wide](const std::vector<const Shape*>& in, int threads) -> uint64_t {
            if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() < 3 ||
                in[1]->size() != in[0]->size() || attrs.group <= 0)
              return 0;
            const ir::ConvGeometry g = geometryOf(attrs, *in[0], *in[1]);
            // An empty output runs nothing (the kernel returns at once): no workspace, however
            // large the image.
            if ((*in[0])[0] == 0 || (*in[1])[1] == 0 || shapeNumel(g.output) == 0) return 0;
            const ConvTransposeScratch s =
                wide ? convTransposeScratch<double>(g, attrs.group, *in[0], *in[1], threads)
                     : convTransposeScratch<float>(g, attrs.group, *in[0], *in[1], threads);
            return s.columnBytes + s.gemmBytes;
          },
          {}};
}

// BF16 (layers marked bf16): W [C, Co, kernel...] packed once as the GEMM's left operand W^T,
// X rounded to BF16 as it is packed, FP32 sums; bias and col2im in FP32.
Kernel makeBf16ConvTranspose(const KernelCreateInfo& info, const KernelState* saved) {
  const ConvTransposeAttrs attrs = convTransposeAttrs(info.node);
  const Tensor& w = *info.constants[1];  // its shape; a plan may hold no values
  const int64_t channels = w.dim(0), rows = w.numel() / channels;
  auto packed = std::make_shared<PackedBf16Matrix>(
      saved ? savedBf16Matrix(info, *saved, PackedBf16Matrix::Side::kA, rows, channels)
            : packBf16A(true, rows, channels, w.data<float>(), rows));
  info.keepsOwnCopyOf(1);
  Kernel k;
  k.run = [attrs, packed](KernelContext& ctx) { convTransposeKernel(ctx, attrs, packed.get()); };
  k.workspace = [attrs, packed](const std::vector<const Shape*>& in, int threads) -> uint64_t {
    if (in.size() < 2 || !in[0] || !in[1] || in[0]->size() < 3 || in[1]->size() != in[0]->size())
      return 0;
    const ir::ConvGeometry g = geometryOf(attrs, *in[0], *in[1]);
    if ((*in[0])[0] == 0 || shapeNumel(g.output) == 0) return 0;
    const ConvTransposeScratch s =
        convTransposeScratch<float>(g, 1, *in[0], *in[1], threads, packed.get());
    return s.columnBytes + s.gemmBytes;
  };
  k.save = [packed] { return bf16PackedState(*packed, nullptr); };
  return k;
}

const bool kRegistered = [] {
  KernelCandidate bf16;
  bf16.id = "bf16_conv_transpose_gemm_avx512bf16";
  bf16.isa = CpuIsa::kAvx512Bf16;
  bf16.supports = bf16GemmConvDeclines;
  bf16.create = [](const KernelCreateInfo& i) { return makeBf16ConvTranspose(i, nullptr); };
  bf16.restore = [](const KernelCreateInfo& i, const KernelState& s) {
    return makeBf16ConvTranspose(i, &s);
  };
  KernelRegistry::global().addCandidate("", "ConvTranspose", DataType::kFloat32, std::move(bf16));
  KernelRegistry::global().addGenericKernel("", "ConvTranspose", makeConvTransposeKernel);
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
