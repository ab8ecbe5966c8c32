// libkiln_test_faults.so: a planted wrong kernel, for the tests of `kiln compare` only (never built
// into kiln itself). Loaded with --plugins, it puts a float32 Tanh candidate ahead of kiln's own
// (a family for a dtype is tried before the any-dtype family, kernel_registry.h) that computes
// tanh(x) + 0.5. kiln's reference mode takes the most general candidate, kiln's own, so a
// comparison must flag the Tanh layer's output and nothing before it.
#include <cmath>

#include "backends/cpu/kernel_registry.h"

namespace {

void wrongTanh(kiln::cpu::KernelContext& ctx) {
  const kiln::Tensor& x = ctx.input(0);
  kiln::Tensor& y = ctx.output(0);
  const float* in = x.data<float>();
  float* out = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::tanh(in[i]) + 0.5f;
}

const bool registered = [] {
  kiln::cpu::KernelCandidate candidate;
  candidate.id = "test_f32_tanh_plus_half_fault";
  candidate.create = [](const kiln::cpu::KernelCreateInfo&) {
    return kiln::cpu::Kernel{wrongTanh, {}, {}};
  };
  kiln::cpu::KernelRegistry::global().addCandidate("", "Tanh", kiln::DataType::kFloat32,
                                                   std::move(candidate));
  return true;
}();

}  // namespace
