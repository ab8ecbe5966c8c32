// Shared pieces of the CPU kernels of onnxruntime's com.microsoft.nchwc ops
// (ir/ops/contrib_nchwc.h): moving channels between plain and blocked layouts of any block size,
// and running another op's kernel (kiln's own kiln::Nchwc* op when the block is 16, an ai.onnx op
// on NCHW tensors otherwise) for a copy of the node, writing straight into this node's output.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "core/internal_api.h"

namespace kiln::cpu {

/// Copies `channels` plain channels [N, channels, pixels] (channelsLast: [N, pixels, channels])
/// into the blocked [N, padded / block, pixels, block], zero in the padding channels.
KILN_INTERNAL_API void blockChannels(const float* plain, float* blocked, int64_t batch,
                                     int64_t channels, int64_t padded, int64_t pixels,
                                     int64_t block, bool channelsLast);
/// The reverse: the first `channels` of the blocked tensor's `padded` channels.
KILN_INTERNAL_API void unblockChannels(const float* blocked, float* plain, int64_t batch,
                                       int64_t channels, int64_t padded, int64_t pixels,
                                       int64_t block, bool channelsLast);

/// A 16-channel blocked [N, C, H, W] as kiln's own [N, C / 16, H, W, 16] (ir/ops/nchwc.h), the
/// same bytes; unknown dims stay unknown.
ir::SymShape kilnBlockedShape(const ir::SymShape& s);
Shape kilnBlockedShape(const Shape& s);

/// Float tensors of these shapes over the node's scratch memory (ctx.workspace, each 64-byte
/// aligned; uninitialized), valid for this call: the slower path's NCHW copies.
std::vector<Tensor> scratchTensors(KernelContext& ctx, const std::vector<Shape>& shapes);

/// The filter layouts onnxruntime's NCHWc transformer writes (ir/ops/contrib_nchwc.h).
enum class OrtFilterLayout { kOIHWBo, kOIHWBiBo };

/// W [outChannels, inPerGroup, kH, kW] in `layout` for `block` back in OIHW order.
KILN_INTERNAL_API std::vector<float> ortFilterToOihw(const float* w, int64_t outChannels,
                                                     int64_t inPerGroup, int64_t taps,
                                                     int64_t block, OrtFilterLayout layout);

/// The kernel of another op made for a copy of this node (same name and attributes, changed by
/// `adjust`), given its own input types and constants.
class StagedKernel {
 public:
  /// Null from make() when no candidate of the op supports the copy (the caller falls back).
  static std::shared_ptr<StagedKernel> make(const KernelCreateInfo& info, const std::string& domain,
                                            const std::string& opType, int64_t opset,
                                            std::vector<ir::TypeInfo> inputTypes,
                                            std::vector<std::shared_ptr<const Tensor>> constants,
                                            const std::function<void(ir::Node&)>& adjust = {});
  /// Runs it on `inputs`; its one output, `shape` float32, is written into `out` (the same number
  /// of elements).
  void runInto(std::vector<const Tensor*> inputs, Tensor& out, const Shape& shape) const;

 private:
  std::shared_ptr<ir::Node> node_;
  std::vector<ir::TypeInfo> types_;
  std::vector<std::shared_ptr<const Tensor>> constants_;  // kept alive for the kernel
  KernelFn fn_;
};

}  // namespace kiln::cpu
