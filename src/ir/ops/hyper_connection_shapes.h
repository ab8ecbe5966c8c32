// The stream and gate layouts of onnxruntime's hyper-connection ops (HyperConnectionPreMix,
// HyperConnectionPostMix): C streams of H features, grouped (..., C, H) or flattened (..., C * H)
// with num_branches = C, and per-row gates of suffix (C), (C, 1), (C, H), or for PreMix's flattened
// streams (C * H). Shared by the shape rules (ir/ops/contrib_llm_mixes.cpp) and the kernels, so one
// rule decides both; each function returns an error message, empty when the shapes fit.
#pragma once
#include <string>

#include "kiln/tensor.h"

namespace kiln::ir {

struct StreamShape {
  int64_t rows = 0, branches = 0, hidden = 0;  // rows: product of the leading dimensions
  size_t prefixRank = 0;
  Shape reduced;  // the leading dimensions, then H
};

inline std::string resolveStreams(const Shape& s, int64_t numBranches, StreamShape& out) {
  const size_t rank = s.size();
  if (numBranches < 0) return "num_branches must be 0 or positive";
  if (numBranches > 0) {
    if (rank < 1 || s[rank - 1] <= 0 || s[rank - 1] % numBranches != 0)
      return "flattened streams (num_branches set) must end in a positive multiple of num_branches";
    out.branches = numBranches;
    out.hidden = s[rank - 1] / numBranches;
    out.prefixRank = rank - 1;
  } else {
    if (rank < 2 || s[rank - 2] <= 0 || s[rank - 1] <= 0)
      return "grouped streams must be (..., C, H) with C and H positive";
    out.branches = s[rank - 2];
    out.hidden = s[rank - 1];
    out.prefixRank = rank - 2;
  }
  out.rows = 1;
  out.reduced.assign(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(out.prefixRank));
  for (int64_t d : out.reduced) {
    if (__builtin_mul_overflow(out.rows, d, &out.rows))
      return "the streams' leading dimensions hold more rows than int64";
  }
  out.reduced.push_back(out.hidden);
  return {};
}

/// kPerBranch: one gate per row and stream; kPerFeature: one per row, stream and feature.
enum class GateLayout { kPerBranch, kPerFeature };

inline std::string resolveGate(const Shape& gate, const Shape& streams, const StreamShape& p,
                               bool allowFlatFeature, GateLayout& layout) {
  bool prefix = gate.size() >= p.prefixRank;
  for (size_t i = 0; prefix && i < p.prefixRank; ++i) prefix = gate[i] == streams[i];
  const size_t suffix = prefix ? gate.size() - p.prefixRank : 0;
  const int64_t* g = suffix ? gate.data() + p.prefixRank : nullptr;  // read only when suffix > 0
  if (prefix && suffix == 1 && g[0] == p.branches) {
    layout = GateLayout::kPerBranch;
  } else if (prefix && suffix == 1 && allowFlatFeature && streams.size() == p.prefixRank + 1 &&
             g[0] == p.branches * p.hidden) {
    layout = GateLayout::kPerFeature;
  } else if (prefix && suffix == 2 && g[0] == p.branches && g[1] == 1) {
    layout = GateLayout::kPerBranch;
  } else if (prefix && suffix == 2 && g[0] == p.branches && g[1] == p.hidden) {
    layout = GateLayout::kPerFeature;
  } else {
    return std::string("must have the streams' leading dimensions, then (C), (C, 1), (C, H)") +
           (allowFlatFeature && streams.size() == p.prefixRank + 1 ? " or (C * H)" : "") +
           " with C = " + std::to_string(p.branches) + ", H = " + std::to_string(p.hidden);
  }
  return {};
}

inline int64_t gateOffset(GateLayout layout, int64_t row, int64_t branch, int64_t feature,
                          const StreamShape& p) {
  return layout == GateLayout::kPerBranch ? row * p.branches + branch
                                          : (row * p.branches + branch) * p.hidden + feature;
}

}  // namespace kiln::ir
