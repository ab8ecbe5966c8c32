// CPU kernel of Einsum: for every output element, sums the product of the inputs over the
// labels the output omits. Repeated labels in a term read diagonals; size-1 axes broadcast.
#include "backends/cpu/kernels/elementwise_util.h"
#include "backends/cpu/kernels/node_label.h"
#include "ir/ops/einsum_equation.h"

namespace kiln::cpu {
namespace {

/// Odometer over a list of labels: advances the index and moves each input offset by the strides.
struct LabelCounter {
  std::vector<int64_t> sizes;                 // per counted label
  std::vector<std::vector<int64_t>> strides;  // per counted label, per input
  std::vector<int64_t> index;

  void reset() { index.assign(sizes.size(), 0); }
  void advance(std::vector<int64_t>& offsets) {
    for (size_t d = sizes.size(); d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < offsets.size(); ++k) offsets[k] += strides[d][k];
      if (index[d] < sizes[d]) return;
      for (size_t k = 0; k < offsets.size(); ++k) offsets[k] -= strides[d][k] * sizes[d];
      index[d] = 0;
    }
  }
};

struct EinsumAttrs {
  ir::Node label;  // parseEinsum names the node when the equation does not fit the input ranks
  std::string equation;
};

EinsumAttrs einsumAttrs(const ir::Node& node) {
  return {nodeLabel(node), ir::attrString(node, "equation")};
}

void einsumKernel(KernelContext& ctx, const EinsumAttrs& attrs) {
  const size_t n = ctx.numInputs();
  std::vector<int64_t> ranks;
  for (size_t k = 0; k < n; ++k) ranks.push_back(static_cast<int64_t>(ctx.input(k).rank()));
  const ir::EinsumEquation eq = ir::parseEinsum(attrs.label, attrs.equation, ranks);

  const auto labels = static_cast<size_t>(eq.labelCount);
  std::vector<int64_t> sizes(labels, 1);
  std::vector<std::vector<int64_t>> strides(labels, std::vector<int64_t>(n, 0));
  std::vector<bool> used(labels, false);
  for (size_t k = 0; k < n; ++k) {
    const Shape& shape = ctx.input(k).shape();
    int64_t stride = 1;
    for (size_t a = shape.size(); a-- > 0;) {
      const auto l = static_cast<size_t>(eq.inputLabels[k][a]);
      used[l] = true;
      if (shape[a] != 1) {
        if (sizes[l] != 1 && sizes[l] != shape[a]) {
          ctx.fail("einsum label sizes disagree: " + std::to_string(sizes[l]) + " and " +
                   std::to_string(shape[a]));
        }
        sizes[l] = shape[a];
        strides[l][k] += stride;  // a repeated label walks the diagonal
      }
      stride *= shape[a];
    }
  }
  LabelCounter outCounter, sumCounter;
  std::vector<bool> inOutput(labels, false);
  for (int l : eq.outputLabels) {
    inOutput[static_cast<size_t>(l)] = true;
    outCounter.sizes.push_back(sizes[static_cast<size_t>(l)]);
    outCounter.strides.push_back(strides[static_cast<size_t>(l)]);
  }
  for (size_t l = 0; l < labels; ++l) {
    if (!used[l] || inOutput[l]) continue;
    sumCounter.sizes.push_back(sizes[l]);
    sumCounter.strides.push_back(strides[l]);
  }
  // The last summed label is walked by the innermost loop; the counter covers the others.
  int64_t innerSize = 1;
  std::vector<int64_t> innerStrides(n, 0);
  if (!sumCounter.sizes.empty()) {
    innerSize = sumCounter.sizes.back();
    innerStrides = sumCounter.strides.back();
    sumCounter.sizes.pop_back();
    sumCounter.strides.pop_back();
  }
  int64_t outerSumCount = 1;
  for (int64_t s : sumCounter.sizes) outerSumCount *= s;

  Tensor& y = ctx.output(0);
  dispatchNumeric(ctx.input(0).dtype(), "Einsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<const T*> in(n);
    for (size_t k = 0; k < n; ++k) {
      if (ctx.input(k).dtype() != ctx.input(0).dtype()) ctx.fail("inputs must share one type");
      in[k] = ctx.input(k).data<T>();
    }
    T* py = y.data<T>();
    const int64_t outCount = y.numel();
    std::vector<int64_t> outOffsets(n, 0), offsets(n);
    outCounter.reset();
    for (int64_t o = 0; o < outCount; ++o) {
      C acc = 0;
      offsets = outOffsets;
      sumCounter.reset();
      for (int64_t s = 0; s < outerSumCount; ++s) {
        if (n == 1) {
          const T* a = in[0] + offsets[0];
          for (int64_t j = 0; j < innerSize; ++j) acc += C(a[j * innerStrides[0]]);
        } else if (n == 2) {
          const T* a = in[0] + offsets[0];
          const T* b = in[1] + offsets[1];
          for (int64_t j = 0; j < innerSize; ++j)
            acc += C(a[j * innerStrides[0]]) * C(b[j * innerStrides[1]]);
        } else {
          for (int64_t j = 0; j < innerSize; ++j) {
            C product = 1;
            for (size_t k = 0; k < n; ++k) product *= C(in[k][offsets[k] + j * innerStrides[k]]);
            acc += product;
          }
        }
        sumCounter.advance(offsets);
      }
      py[o] = static_cast<T>(acc);
      outCounter.advance(outOffsets);
    }
  });
}

KILN_REGISTER_CPU_KERNEL("Einsum", bindKernel(einsumAttrs, einsumKernel));

}  // namespace
}  // namespace kiln::cpu
