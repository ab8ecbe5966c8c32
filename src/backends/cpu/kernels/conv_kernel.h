// What the convolution kernels of Conv and kiln::FusedConv share: the attributes a kernel keeps
// from its node when it is made (it never reads the node while running), the checks of each
// call's tensors, and the im2col + GEMM algorithm every other candidate falls back to. The
// float32 candidates are listed in conv_candidates.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>

#include "backends/cpu/activation.h"
#include "backends/cpu/gemm/sgemm.h"
#include "backends/cpu/kernel.h"
#include "ir/ops/conv_geometry.h"

namespace kiln::cpu {

struct ConvAttrs {
  ir::Node
      node;  // label with the attributes ir::convGeometry reads, for sizes unknown at build time
  int64_t group = 1;
  bool fused =
      false;  // kiln::FusedConv: float32 only, optional residual Z (input 3), an activation
  Activation act;
  // X's and W's spatial sizes when both were static at build time, and the geometry at them.
  std::optional<Shape> xSpatial, wSpatial;
  std::optional<ir::ConvGeometry> geometry;
};

/// Reads the node's attributes and static shapes; fails naming the node on bad attributes.
ConvAttrs convAttrs(const KernelCreateInfo& info, bool fused);

/// The checked tensors of one call.
struct ConvCall {
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* residual = nullptr;  // FusedConv's Z, shaped like Y
  Tensor* y = nullptr;
  ir::ConvGeometry g;
};

/// Checks X, W, B (and Z) against the attributes and makes Y; false when Y is empty.
bool startConvCall(KernelContext& ctx, const ConvAttrs& a, ConvCall& call);

/// The geometry for X and W of these shapes (the one computed at build time when their spatial
/// sizes are the static ones); nullopt when a shape is unknown or the output empty.
std::optional<ir::ConvGeometry> convGeometryFor(const ConvAttrs& a, const Shape* x, const Shape* w);

/// C[M x N] (row stride ldc) = epilogue(W x B) with the constant W of an ungrouped convolution
/// held packed by its kernel (M output channels, K = depth), B a column block (row stride ldb),
/// packing B into `workspace` of workspaceBytes(N, threads) bytes.
struct PackedWeightsProduct {
  std::function<void(int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc,
                     const GemmEpilogue& ep, void* workspace)>
      multiply;
  std::function<uint64_t(int64_t N, int threads)> workspaceBytes;
};

/// The product of W packed for sgemm (packA).
PackedWeightsProduct sgemmWeightsProduct(const PackedMatrix& packed);

/// Scratch bytes of im2col + GEMM for X and W of these shapes on `threads` threads: the column
/// buffer (none when the convolution reads X directly), then the GEMM's packing, done by
/// `product` when given (ungrouped float32) or by sgemm (float math, which elementSize 4 means:
/// float32 and the 16-bit floats); 0 when a shape is unknown.
uint64_t convWorkspaceBytes(const ConvAttrs& a, const Shape* x, const Shape* w, size_t elementSize,
                            int threads, const PackedWeightsProduct* product = nullptr);

/// y = act(conv(x, w) + bias + residual) in float32 by im2col + GEMM (pointwise: GEMM on X
/// directly; one input channel per group: taps accumulated directly), the weight products done
/// by `product` when given (W packed by its kernel), else by sgemm on W; the column buffer and
/// the GEMM's packing come from ctx.workspace.
void convolveIm2colFloat(KernelContext& ctx, const ConvAttrs& a, const ConvCall& call,
                         const PackedWeightsProduct* product);

}  // namespace kiln::cpu
