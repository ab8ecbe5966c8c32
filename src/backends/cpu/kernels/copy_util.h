// Building blocks for kernels that only move elements (Transpose, Slice, Expand, Pad, Gather...):
// they work on a storage type chosen by element size, so every dtype, strings included, is covered
// by five instantiations.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/transpose_bytes.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {

/// Calls fn(TypeTag<T>{}) with T an unsigned integer as wide as the element, or std::string.
template <typename Fn>
decltype(auto) dispatchStorage(DataType type, const char* what, Fn&& fn) {
  if (type == DataType::kString) return fn(TypeTag<std::string>{});
  switch (dataTypeSize(type)) {
    case 1:
      return fn(TypeTag<uint8_t>{});
    case 2:
      return fn(TypeTag<uint16_t>{});
    case 4:
      return fn(TypeTag<uint32_t>{});
    case 8:
      return fn(TypeTag<uint64_t>{});
    default:
      throwUnsupportedType(type, what);
  }
}

/// Row-major strides (in elements) of a contiguous tensor of this shape.
inline std::vector<int64_t> contiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Product of dims [begin, end) of a shape.
inline int64_t dimProduct(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

/// The row-major multi-index (into `index`) of position `linear` in `dims`, and its offsets in a
/// source and a destination walked with `srcSteps` and `dstSteps`: where a thread's range starts.
inline std::pair<int64_t, int64_t> outerOffsets(int64_t linear, const Shape& dims,
                                                const std::vector<int64_t>& srcSteps,
                                                const std::vector<int64_t>& dstSteps,
                                                std::vector<int64_t>& index) {
  int64_t src = 0, dst = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = linear % dims[d];
    linear /= dims[d];
    src += index[d] * srcSteps[d];
    dst += index[d] * dstSteps[d];
  }
  return {src, dst};
}

/// copyStrided for a transpose: dim j is contiguous in the source but not the innermost output
/// dim, so copying the (j, innermost) plane tile by tile keeps both reads and writes in cache.
template <typename T>
void copyTiled(const T* src, const Shape& dims, const std::vector<int64_t>& steps, size_t j,
               T* dst) {
  constexpr int64_t kTile = 16;
  const size_t last = dims.size() - 1;
  const std::vector<int64_t> dstStrides = contiguousStrides(dims);
  const int64_t rows = dims[j], cols = dims[last];
  const int64_t rowStride = dstStrides[j], colStep = steps[last];
  Shape outerDims;
  std::vector<int64_t> outerSrc, outerDst;
  for (size_t d = 0; d < last; ++d) {
    if (d == j) continue;
    outerDims.push_back(dims[d]);
    outerSrc.push_back(steps[d]);
    outerDst.push_back(dstStrides[d]);
  }
  const int64_t planes = shapeNumel(outerDims);
  // Planes are independent: threads take contiguous ranges of them.
  parallelForAtLeast(planes, std::max<int64_t>(1, kMinElementsPerThread / (rows * cols)),
                     [&](int64_t p0, int64_t p1) {
                       std::vector<int64_t> index(outerDims.size(), 0);
                       auto [srcOffset, dstOffset] =
                           outerOffsets(p0, outerDims, outerSrc, outerDst, index);
                       for (int64_t p = p0; p < p1; ++p) {
                         const T* s = src + srcOffset;
                         T* o = dst + dstOffset;
                         for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
                           const int64_t rEnd = std::min(r0 + kTile, rows);
                           for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                             const int64_t cEnd = std::min(c0 + kTile, cols);
                             for (int64_t r = r0; r < rEnd; ++r)
                               for (int64_t c = c0; c < cEnd; ++c)
                                 o[r * rowStride + c] = s[r + c * colStep];
                           }
                         }
                         for (size_t d = outerDims.size(); d-- > 0;) {
                           srcOffset += outerSrc[d];
                           dstOffset += outerDst[d];
                           if (++index[d] < outerDims[d]) break;
                           srcOffset -= outerSrc[d] * outerDims[d];
                           dstOffset -= outerDst[d] * outerDims[d];
                           index[d] = 0;
                         }
                       }
                     });
}

/// Fills contiguous `dst` of `shape` with src[sum(i_d * strides[d])]; strides may be 0 (broadcast)
/// or negative (reversed), src points at the element of index 0.
template <typename T>
void copyStrided(const T* src, const Shape& shape, const std::vector<int64_t>& strides, T* dst) {
  // Drop unit dims and merge dims that are contiguous in the source so the inner loop is long.
  Shape dims;
  std::vector<int64_t> steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    if (!dims.empty() && steps.back() == strides[d] * shape[d]) {
      dims.back() *= shape[d];
      steps.back() = strides[d];
    } else {
      dims.push_back(shape[d]);
      steps.push_back(strides[d]);
    }
  }
  if (dims.empty()) {
    *dst = *src;
    return;
  }
  const size_t rank = dims.size();
  const int64_t inner = dims.back();
  const int64_t step = steps.back();
  // Byte matrices transposed whole (the last two dims read a contiguous [inner][dims[-2]] block).
  if constexpr (sizeof(T) == 1) {
    if (rank >= 2 && steps[rank - 2] == 1 && step == dims[rank - 2]) {
      const Shape outerDims(dims.begin(), dims.end() - 2);
      const std::vector<int64_t> outerSteps(steps.begin(), steps.end() - 2);
      const std::vector<int64_t> noSteps(outerDims.size(), 0);
      std::vector<int64_t> index(outerDims.size(), 0);
      const int64_t matrix = inner * dims[rank - 2];
      for (int64_t o = 0; o < shapeNumel(outerDims); ++o) {
        const int64_t offset = outerOffsets(o, outerDims, outerSteps, noSteps, index).first;
        transposeBytes(reinterpret_cast<const uint8_t*>(src + offset), inner, dims[rank - 2],
                       reinterpret_cast<uint8_t*>(dst + o * matrix));
      }
      return;
    }
  }
  // Short strided rows stay in L1 between consecutive rows; long ones need tiling.
  if (step != 1 && step != 0 && inner >= 512) {
    for (size_t j = 0; j + 1 < rank; ++j) {
      if (steps[j] == 1 && dims[j] >= 16) return copyTiled(src, dims, steps, j, dst);
    }
  }
  const int64_t outer = shapeNumel(dims) / inner;
  const Shape outerDims(dims.begin(), dims.end() - 1);
  const std::vector<int64_t> outerSteps(steps.begin(), steps.end() - 1);
  const std::vector<int64_t> rowSteps(rank - 1, 0);  // destination offsets come from the row number
  // Rows are independent: threads take contiguous ranges of them.
  parallelForAtLeast(
      outer, std::max<int64_t>(1, kMinElementsPerThread / inner), [&](int64_t o0, int64_t o1) {
        std::vector<int64_t> index(rank - 1, 0);
        int64_t offset = outerOffsets(o0, outerDims, outerSteps, rowSteps, index).first;
        for (int64_t o = o0; o < o1; ++o) {
          const T* s = src + offset;
          T* row = dst + o * inner;
          if (step == 1) {
            std::copy(s, s + inner, row);
          } else if (step == 0) {
            std::fill(row, row + inner, *s);
          } else {
            for (int64_t i = 0; i < inner; ++i) row[i] = s[i * step];
          }
          for (size_t d = rank - 1; d-- > 0;) {
            offset += steps[d];
            if (++index[d] < dims[d]) break;
            offset -= steps[d] * dims[d];
            index[d] = 0;
          }
        }
      });
}

/// copyStrided on tensors of any dtype; dst must be allocated with `shape` and src's dtype.
inline void copyStridedTensor(const Tensor& src, int64_t srcOffset,
                              const std::vector<int64_t>& strides, Tensor& dst, const char* what) {
  dispatchStorage(src.dtype(), what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    copyStrided(src.data<T>() + srcOffset, dst.shape(), strides, dst.data<T>());
  });
}

/// Converts index tensor values (int32 or int64) to int64.
inline std::vector<int64_t> indexValues(const KernelContext& ctx, const Tensor& indices) {
  if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) {
    ctx.fail("indices must be int32 or int64, got " + dataTypeName(indices.dtype()),
             ErrorCode::kUnsupportedNode);
  }
  return indices.toInt64Vector();
}

/// Normalizes a possibly negative index into [0, dim); fails naming the node and the index.
inline int64_t checkedIndex(const KernelContext& ctx, int64_t index, int64_t dim,
                            const char* what = "index") {
  int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim) {
    ctx.fail(std::string(what) + " " + std::to_string(index) +
                 " is out of range for a dim of size " + std::to_string(dim),
             ErrorCode::kInvalidArgument);
  }
  return i;
}

/// For GatherElements/ScatterElements: the offset in data (of `dataShape`) of each element of
/// `indexTensor`, which indexes along `axis` and takes its other coordinates from its own position.
inline std::vector<int64_t> elementOffsets(const KernelContext& ctx, const Shape& dataShape,
                                           const Tensor& indexTensor, int64_t axis) {
  const size_t rank = dataShape.size();
  if (indexTensor.rank() != rank)
    ctx.fail("data and indices differ in rank", ErrorCode::kInvalidArgument);
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis && indexTensor.dim(d) > dataShape[d]) {
      ctx.fail("indices shape " + shapeToString(indexTensor.shape()) + " exceeds data shape " +
                   shapeToString(dataShape),
               ErrorCode::kInvalidArgument);
    }
  }
  std::vector<int64_t> offsets = indexValues(ctx, indexTensor);
  const std::vector<int64_t> strides = contiguousStrides(dataShape);
  std::vector<int64_t> index(rank, 0);
  int64_t base = 0;  // offset of the current position with the axis coordinate left out
  for (int64_t& off : offsets) {
    off = base + checkedIndex(ctx, off, dataShape[axis]) * strides[axis];
    for (size_t d = rank; d-- > 0;) {
      if (static_cast<int64_t>(d) != axis) base += strides[d];
      if (++index[d] < indexTensor.dim(d)) break;
      if (static_cast<int64_t>(d) != axis) base -= strides[d] * index[d];
      index[d] = 0;
    }
  }
  return offsets;
}

}  // namespace kiln::cpu
