// CPU kernel of Col2Im: the inverse of im2col. Column l of input (N, C * prod(block), L) holds
// one sliding block; each element is added to the image position it was taken from (positions in
// the padding are dropped), so overlapping blocks sum.
#include <limits>

#include "backends/cpu/kernels/copy_util.h"
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"

namespace kiln::cpu {
namespace {

// The attributes; an empty one takes its default for the rank of image_shape.
struct Col2ImAttrs {
  std::vector<int64_t> dilations, strides, pads;
};

Col2ImAttrs col2ImAttrs(const ir::Node& node) {
  return {ir::attrInts(node, "dilations", {}), ir::attrInts(node, "strides", {}),
          ir::attrInts(node, "pads", {})};
}

void col2ImKernel(KernelContext& ctx, const Col2ImAttrs& attrs) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> image = ctx.input(1).toInt64Vector();
  const std::vector<int64_t> block = ctx.input(2).toInt64Vector();
  const size_t r = image.size();
  if (block.size() != r || r == 0)
    ctx.fail("image_shape and block_shape must have the same non-zero length",
             ErrorCode::kInvalidArgument);
  const std::vector<int64_t> dilations =
      attrs.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs.dilations;
  const std::vector<int64_t> strides =
      attrs.strides.empty() ? std::vector<int64_t>(r, 1) : attrs.strides;
  const std::vector<int64_t> pads =
      attrs.pads.empty() ? std::vector<int64_t>(2 * r, 0) : attrs.pads;
  if (dilations.size() != r || strides.size() != r || pads.size() != 2 * r) {
    ctx.fail("dilations and strides need " + std::to_string(r) + " values and pads " +
                 std::to_string(2 * r),
             ErrorCode::kInvalidModel);
  }
  if (x.rank() != 3)
    ctx.fail("input must be (N, C * prod(block_shape), L), got " + x.describe(),
             ErrorCode::kInvalidArgument);
  // image_shape and block_shape are run-time data and the attributes anything int64 holds: the
  // sizes are checked products and the block count is computed in 128 bits.
  int64_t blockSize = 1, numBlocks = 1;
  std::vector<int64_t> blocks(r);  // block positions along each axis
  for (size_t i = 0; i < r; ++i) {
    const std::string axis = "axis " + std::to_string(i);
    if (image[i] <= 0 || block[i] <= 0)
      ctx.fail("image_shape and block_shape must be positive, got " + std::to_string(image[i]) +
                   " and " + std::to_string(block[i]) + " on " + axis,
               ErrorCode::kInvalidArgument);
    if (strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + r] < 0)
      ctx.fail("strides and dilations must be positive and pads not negative",
               ErrorCode::kInvalidModel);
    const __int128 span = static_cast<__int128>(image[i]) + pads[i] + pads[i + r] -
                          static_cast<__int128>(dilations[i]) * (block[i] - 1) - 1;
    if (span < 0)
      ctx.fail("the blocks do not fit the padded image on " + axis, ErrorCode::kInvalidArgument);
    const __int128 count = span / strides[i] + 1;
    blocks[i] = static_cast<int64_t>(count);
    if (count > std::numeric_limits<int64_t>::max() ||
        __builtin_mul_overflow(blockSize, block[i], &blockSize) ||
        __builtin_mul_overflow(numBlocks, blocks[i], &numBlocks))
      ctx.fail("prod(block_shape) or the number of sliding blocks is past int64 on " + axis,
               ErrorCode::kInvalidArgument);
  }
  if (x.dim(1) % blockSize != 0) {
    ctx.fail("input dim 1 of " + x.describe() +
                 " is not a multiple of prod(block_shape) = " + std::to_string(blockSize),
             ErrorCode::kInvalidArgument);
  }
  if (x.dim(2) != numBlocks) {
    ctx.fail("input dim 2 of " + x.describe() + " must equal the number of sliding blocks, " +
                 std::to_string(numBlocks),
             ErrorCode::kInvalidArgument);
  }
  const int64_t batches = x.dim(0), channels = x.dim(1) / blockSize;
  Shape outShape{batches, channels};
  outShape.insert(outShape.end(), image.begin(), image.end());
  Tensor& y = ctx.allocateOutput(0, x.dtype(), outShape);
  // With no (batch, channel) pair the tables below, sized by the image and the blocks alone,
  // would not be bounded by any tensor.
  if (batches * channels == 0) return;
  const int64_t imageSize = shapeNumel(image);
  const std::vector<int64_t> imageStrides = contiguousStrides(image);

  // For every (kernel offset, block position) pair, the image offset it lands on, or -1 in the
  // padding.
  std::vector<int64_t> target(static_cast<size_t>(blockSize * numBlocks));
  std::vector<int64_t> k(r, 0), b(r, 0);
  for (int64_t kk = 0; kk < blockSize; ++kk) {
    for (int64_t i = static_cast<int64_t>(r), rem = kk; i-- > 0;)
      k[i] = rem % block[i], rem /= block[i];
    for (int64_t bb = 0; bb < numBlocks; ++bb) {
      for (int64_t i = static_cast<int64_t>(r), rem = bb; i-- > 0;)
        b[i] = rem % blocks[i], rem /= blocks[i];
      int64_t offset = 0;
      for (size_t i = 0; i < r && offset >= 0; ++i) {
        const int64_t pos = b[i] * strides[i] - pads[i] + k[i] * dilations[i];
        offset = (pos < 0 || pos >= image[i]) ? -1 : offset + pos * imageStrides[i];
      }
      target[kk * numBlocks + bb] = offset;
    }
  }
  dispatchNumeric(x.dtype(), "Col2Im", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<C> acc(static_cast<size_t>(imageSize));
    for (int64_t nc = 0; nc < batches * channels; ++nc) {
      std::fill(acc.begin(), acc.end(), C(0));
      const T* col = x.data<T>() + nc * blockSize * numBlocks;
      for (int64_t j = 0; j < blockSize * numBlocks; ++j) {
        if (target[j] >= 0) acc[target[j]] = wrapAdd(acc[target[j]], static_cast<C>(col[j]));
      }
      T* out = y.data<T>() + nc * imageSize;
      for (int64_t j = 0; j < imageSize; ++j) out[j] = static_cast<T>(acc[j]);
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Col2Im", bindKernel(col2ImAttrs, col2ImKernel));

}  // namespace
}  // namespace kiln::cpu
