// What the integer convolution kernels (qlinear_conv_qgemm.cpp: 1x1 and im2col GEMMs,
// qlinear_conv_depthwise.cpp: direct depthwise) share: the kernel's state made from the node,
// and the checked tensors, geometry and output parameters of one call.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernels/conv_kernel.h"
#include "backends/cpu/kernels/qgemm_ops.h"
#include "backends/cpu/qgemm/qgemm.h"
#include "backends/cpu/thread_pool.h"

namespace kiln::cpu {

struct QConv {
  QProductSignature s;
  ConvAttrs attrs;  // group and the static geometry
  Shape wShape;
  int64_t outChannels = 0, groupOut = 0, groupChannels = 0, kernelSize = 0, depth = 0;
  bool xSigned = false;
  bool channelsLast = false;  // kiln::QConv's channels_last: X and Y are [N, H, W, C]
};

/// The attributes and weight shape of a node (W at s.b), as a QConv without weights.
QConv qconvOf(const KernelCreateInfo& info, const QProductSignature& s);

struct QConvCall {
  const Tensor* x = nullptr;
  Tensor* y = nullptr;
  ir::ConvGeometry g;
  Shape imageShape;
  int64_t batch = 0, imageSize = 0, outSize = 0;
  int32_t xZero = 0;               // as stored in X (not shifted)
  const int32_t* wZero = nullptr;  // shifted as the weights are stored; 1 or outChannels values
  int64_t wZeroCount = 1;
  const int32_t* bias = nullptr;
  QGemmOutput out;
  size_t outElement = 1;  // bytes of one output value
};

/// The geometry of X's shape (channels-last when c is; checked against W and group); fails
/// naming the node.
ir::ConvGeometry qconvGeometry(const KernelContext* ctx, const QConv& c, const Shape& x);

/// Bytes at the end of the workspace for a call's per-channel parameters.
uint64_t qconvParamBytes(const QConv& c);

/// Checks the call's tensors and fills `call`; `params` (qconvParamBytes) holds the multipliers
/// and zero points; wShift is the weights' storage shift (-128 for packed u8, else 0). False
/// when Y is empty.
bool startQConvCall(KernelContext& ctx, const QConv& c, int32_t wShift, void* params,
                    QConvCall& call);

inline uint64_t alignTo64(uint64_t n) { return (n + 63) / 64 * 64; }

/// The one term per output channel of a kernel whose weights are symmetric: bias - x_zero_point *
/// (the channel's weight sum), wrapped to int32 as the accumulators wrap.
void fillChannelTerms(const QConvCall& call, const int32_t* weightSums, int64_t channels,
                      int32_t* terms);

/// Taps a depthwise kernel accumulates exactly in float32: 256 * 255 * 255 < 2^24.
constexpr int64_t kMaxDepthwiseTaps = 256;

/// W (constant, at s.b) as int16 values in its own order: the depthwise candidates' weights.
std::vector<int16_t> depthwiseWeights(const KernelCreateInfo& info, const QProductSignature& s);
/// X's shape among a workspace query's shapes when it has W's rank, else null.
const Shape* qconvInputShape(const QConv& c, const std::vector<const Shape*>& shapes);

/// The depthwise candidate's kernel: one input channel per group, accumulated tap by tap.
Kernel makeQConvDepthwise(const KernelCreateInfo& info, const QProductSignature& s);

/// The AVX-512 depthwise candidate (sixteen channels at a time): why it cannot run c ("" if it
/// can), beyond what the plane-by-plane candidate needs, and its kernel.
std::string qconvDepthwiseChannelsDeclines(const QConv& c);
Kernel makeQConvDepthwiseChannels(const KernelCreateInfo& info, const QProductSignature& s);

/// The channels-last candidate (qlinear_conv_nhwc.cpp): why it cannot run the node ("" if it
/// can), and the candidate. Every other convolution candidate declines channels-last nodes.
std::string qconvNhwcDeclines(const KernelCreateInfo& info, const QProductSignature& s);
KernelCandidate qconvNhwcCandidate(const std::string& prefix, QSignatureFn signature);

/// The channels-last depthwise candidate (qlinear_conv_depthwise_nhwc.cpp): up to four taps wide,
/// uint8 X, an 8-bit output.
KernelCandidate qconvDepthwiseNhwcCandidate(const std::string& prefix, QSignatureFn signature);

}  // namespace kiln::cpu
