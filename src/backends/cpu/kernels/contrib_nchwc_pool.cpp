// CPU kernels of com.microsoft.nchwc MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool and
// Upsample (ir/ops/contrib_nchwc.h). With 16-channel blocks the pools are kiln's own
// kiln::Nchwc* pool kernels on 5-D views of the tensors (ir/ops/nchwc.h); with another block
// size the input is unblocked, the ONNX pool runs on NCHW and its result is blocked again.
// Upsample works on the blocked layout of any block size directly.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/kernels/contrib_nchwc.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/contrib_nchwc.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {
namespace {

struct OrtNchwcPool {
  int64_t block = 0;
  std::shared_ptr<StagedKernel> blocked, nchw;
};

void checkBlocked(const KernelContext& ctx, const Tensor& x, int64_t block) {
  if (x.dtype() != DataType::kFloat32 || x.rank() != 4 || x.dim(1) % block != 0) {
    ctx.fail("input 0 (X) must be a blocked float32 [N, C, H, W] with C a multiple of " +
                 std::to_string(block) + ", got " + x.describe(),
             ErrorCode::kInvalidArgument);
  }
}

// kiln's pool for 16-channel blocks, else the ONNX one (`opset`) on NCHW.
KernelFn makePool(const KernelCreateInfo& info, const char* kilnOp, const char* onnxOp,
                  int64_t opset) {
  auto p = std::make_shared<OrtNchwcPool>();
  p->block = ir::ortNchwcBlockSize();
  ir::TypeInfo x =
      info.inputTypes.empty() || !info.inputTypes[0] ? ir::TypeInfo{} : *info.inputTypes[0];
  auto dropStorageOrder = [](ir::Node& node) { node.attrs.erase("storage_order"); };
  if (p->block == ir::kNchwcBlock) {
    ir::TypeInfo view = x;
    if (view.shape) view.shape = kilnBlockedShape(*view.shape);
    p->blocked = StagedKernel::make(info, "kiln", kilnOp, 1, {view}, {}, dropStorageOrder);
  }
  if (!p->blocked) {
    p->nchw = StagedKernel::make(info, "", onnxOp, opset, {x}, {}, dropStorageOrder);
    if (!p->nchw) ir::failNode(info.node, std::string("no ") + onnxOp + " kernel (internal error)");
  }
  return [p](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    checkBlocked(ctx, x, p->block);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    if (p->blocked) {
      const Tensor view = x.reshaped(kilnBlockedShape(x.shape()));
      return p->blocked->runInto({&view}, y, kilnBlockedShape(y.shape()));
    }
    const int64_t batch = x.dim(0), channels = x.dim(1);
    std::vector<Tensor> scratch = scratchTensors(ctx, {x.shape(), y.shape()});
    Tensor &plain = scratch[0], &pooled = scratch[1];
    unblockChannels(x.data<float>(), plain.data<float>(), batch, channels, channels,
                    x.dim(2) * x.dim(3), p->block, false);
    p->nchw->runInto({&plain}, pooled, y.shape());
    blockChannels(pooled.data<float>(), y.data<float>(), batch, channels, channels,
                  y.dim(2) * y.dim(3), p->block, false);
  };
}

// Upsample's source coordinate of output index o along one axis (onnxruntime's
// NchwcUpsample::ComputeInterpolation).
std::vector<float> sourceCoordinates(int64_t in, int64_t out, int64_t scale,
                                     const std::string& transform) {
  std::vector<float> v(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    float c;
    if (scale == 1)
      c = static_cast<float>(o);
    else if (transform == "align_corners")
      c = out == 1
              ? 0.0f
              : static_cast<float>(o) * static_cast<float>(in - 1) / static_cast<float>(out - 1);
    else if (transform == "half_pixel")
      c = std::max(0.0f, (static_cast<float>(o) + 0.5f) / static_cast<float>(scale) - 0.5f);
    else
      c = static_cast<float>(o) / static_cast<float>(scale);
    v[static_cast<size_t>(o)] = c;
  }
  return v;
}

// The two source indices and the weight of the second one for a coordinate.
struct LinearTap {
  int64_t i0 = 0, i1 = 0;
  float w1 = 0.0f;
};

LinearTap linearTap(float c, int64_t in) {
  LinearTap t;
  t.i0 = std::min<int64_t>(static_cast<int64_t>(c), in - 1);
  t.i1 = std::min<int64_t>(t.i0 + 1, in - 1);
  t.w1 = c - static_cast<float>(t.i0);
  return t;
}

struct UpsampleParams {
  int64_t block = 0, scaleH = 1, scaleW = 1;
  bool linear = false;
  std::string transform;
};

// One output row of one (image, channel block) plane.
void upsampleRow(const UpsampleParams& u, const float* plane, int64_t inW, int64_t outW, int64_t oh,
                 const std::vector<LinearTap>& rows, const std::vector<LinearTap>& columns,
                 float* dst) {
  const int64_t b = u.block;
  if (!u.linear) {
    const float* row = plane + (oh / u.scaleH) * inW * b;
    for (int64_t ow = 0; ow < outW; ++ow)
      std::copy(row + (ow / u.scaleW) * b, row + (ow / u.scaleW + 1) * b, dst + ow * b);
    return;
  }
  const LinearTap& r = rows[static_cast<size_t>(oh)];
  const float* row0 = plane + r.i0 * inW * b;
  const float* row1 = plane + r.i1 * inW * b;
  for (int64_t ow = 0; ow < outW; ++ow) {
    const LinearTap& c = columns[static_cast<size_t>(ow)];
    const float w00 = (1 - r.w1) * (1 - c.w1), w01 = (1 - r.w1) * c.w1;
    const float w10 = r.w1 * (1 - c.w1), w11 = r.w1 * c.w1;
    const float *p00 = row0 + c.i0 * b, *p01 = row0 + c.i1 * b;
    const float *p10 = row1 + c.i0 * b, *p11 = row1 + c.i1 * b;
    for (int64_t k = 0; k < b; ++k)
      dst[ow * b + k] = (w00 * p00[k] + w01 * p01[k]) + (w10 * p10[k] + w11 * p11[k]);
  }
}

KernelFn makeUpsample(const KernelCreateInfo& info) {
  UpsampleParams u;
  u.block = ir::ortNchwcBlockSize();
  const std::vector<int64_t> scales = ir::attrInts(info.node, "scales", {});
  if (scales.size() != 4) ir::failNode(info.node, "attribute 'scales' must have 4 values");
  u.scaleH = scales[2];
  u.scaleW = scales[3];
  u.linear = ir::attrString(info.node, "mode", "nearest") == "linear";
  u.transform = ir::attrString(info.node, "coordinate_transformation_mode", "asymmetric");
  return [u](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    checkBlocked(ctx, x, u.block);
    Tensor& y = ctx.output(0);
    if (y.numel() == 0) return;
    const int64_t inH = x.dim(2), inW = x.dim(3), outH = y.dim(2), outW = y.dim(3);
    std::vector<LinearTap> rows, columns;
    if (u.linear) {
      for (float c : sourceCoordinates(inH, outH, u.scaleH, u.transform))
        rows.push_back(linearTap(c, inH));
      for (float c : sourceCoordinates(inW, outW, u.scaleW, u.transform))
        columns.push_back(linearTap(c, inW));
    }
    const int64_t planes = x.dim(0) * x.dim(1) / u.block;
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    parallelForAtLeast(
        planes * outH,
        std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, outW * u.block)),
        [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t plane = t / outH, oh = t % outH;
            upsampleRow(u, src + plane * inH * inW * u.block, inW, outW, oh, rows, columns,
                        dst + (plane * outH + oh) * outW * u.block);
          }
        });
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "MaxPool",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makePool(info, "NchwcMaxPool", "MaxPool", 12);
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "AveragePool",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makePool(info, "NchwcAveragePool", "AveragePool", 19);
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "GlobalMaxPool",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makePool(info, "NchwcGlobalMaxPool", "GlobalMaxPool", 1);
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "GlobalAveragePool",
                                KernelFactory([](const KernelCreateInfo& info) {
                                  return makePool(info, "NchwcGlobalAveragePool",
                                                  "GlobalAveragePool", 1);
                                }));
KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "Upsample", KernelFactory(makeUpsample));

}  // namespace kiln::cpu
