// How the few-output direct convolution (conv_few_outputs.h) cuts one output row into register
// blocks, for either ISA's lane count: the vectors whose loads stay inside the input row use
// plain loads; those at either border (usually one each) use masked ones, in blocks of their
// own. Each run of vectors is taken in blocks of N, then 8, 4, 2 and 1 (those below N).
// Everything is in an unnamed namespace, so each ISA's file gets its own copy.
#pragma once
#include <algorithm>
#include <cstdint>

namespace kiln::cpu {
namespace {

// Calls block.template operator()<n, Masked>(ox) for the vectors [from, to) of a row, ox being
// the first output column of each block of n vectors.
template <int64_t Lanes, int N, bool Masked, typename Block>
inline void forEachVectorBlock(int64_t from, int64_t to, Block& block) {
  int64_t v = from;
  for (; v + N <= to; v += N) block.template operator()<N, Masked>(v * Lanes);
  if constexpr (N > 8) {
    if (v + 8 <= to) block.template operator()<8, Masked>(v * Lanes), v += 8;
  }
  if constexpr (N > 4) {
    if (v + 4 <= to) block.template operator()<4, Masked>(v * Lanes), v += 4;
  }
  if constexpr (N > 2) {
    if (v + 2 <= to) block.template operator()<2, Masked>(v * Lanes), v += 2;
  }
  if constexpr (N > 1) {
    if (v + 1 <= to) block.template operator()<1, Masked>(v * Lanes), v += 1;
  }
}

// The blocks of one output row of outW columns over an input row of `width` columns, read by a
// kernelW-wide kernel from column ox - padLeft.
template <int64_t Lanes, int N, typename Block>
inline void forEachRowBlock(int64_t outW, int64_t width, int64_t kernelW, int64_t padLeft,
                            Block&& block) {
  const int64_t vectors = (outW + Lanes - 1) / Lanes;
  // Vector v reads input columns v * Lanes - padLeft to v * Lanes + Lanes - 1 + kernelW - 1 -
  // padLeft.
  const int64_t left = std::min(vectors, (padLeft + Lanes - 1) / Lanes);
  int64_t right = vectors;
  while (right > left && (right - 1) * Lanes + Lanes - 1 + kernelW - 1 - padLeft >= width) --right;
  forEachVectorBlock<Lanes, N, true>(0, left, block);
  forEachVectorBlock<Lanes, N, false>(left, right, block);
  forEachVectorBlock<Lanes, N, true>(right, vectors, block);
}

}  // namespace
}  // namespace kiln::cpu
