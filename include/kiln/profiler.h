// Per-layer timing, as with TensorRT's IProfiler: attach one to an ExecutionContext (or give one
// in SessionOptions) and every run reports how long each layer took, in execution order.
#pragma once
#include <string>
#include "kiln/export.h"

namespace kiln {

/// What one layer did in one run.
struct LayerTiming {
  std::string name;    // the layer (node) name
  std::string opType;  // "Conv", "kiln::FusedConv", ...
  std::string shapes;  // the input shapes, e.g. "1x64x56x56 64x64x3x3 64"
  double ms = 0;       // wall-clock time of its kernel, shape inference included
  std::string kernel;  // the kernel candidate that ran it ("f32_nchwc_conv_direct_avx512", ...)
};

class KILN_API IProfiler {
 public:
  virtual ~IProfiler() = default;
  /// Called after each layer of a run finished, on the thread that runs the engine.
  virtual void reportLayerTime(const LayerTiming& timing) = 0;
};

}  // namespace kiln
