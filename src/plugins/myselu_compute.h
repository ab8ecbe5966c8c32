// MYSELU, the compute of the example plugin for an op that ONNX does not define (default domain,
// as exported by a torch symbolic() calling g.op("MYSELU", x, p, const, ...)): y = x * sigmoid(x)
// elementwise on float, i.e. torch.nn.functional.silu (the reference the model test uses). The
// plugin's other inputs (p, const) and its attributes do not take part in the result.
#pragma once
#include <cstdint>

namespace kiln::plugins {

/// y[i] = x[i] * sigmoid(x[i]) for i in [0, count), within a few float ulp; y may equal x.
/// Split over the threads of the context running the plugin (kiln::parallelFor).
void myselu(const float* x, float* y, int64_t count);

}  // namespace kiln::plugins
