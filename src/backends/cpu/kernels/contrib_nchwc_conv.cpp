// CPU kernel of com.microsoft.nchwc Conv (ir/ops/contrib_nchwc.h). The reordered filter is put
// back in OIHW order once, when the kernel is made. With 16-channel blocks the blocked tensors
// are byte for byte kiln's own [N, Cp / 16, H, W, 16] (ir/ops/nchwc.h), so kiln::NchwcConv's
// kernel runs on 5-D views of them; with another block size (8 on AVX2-only CPUs), or where
// that kernel declines, X is unblocked, the ONNX Conv kernel runs on NCHW, and the result is
// blocked again before Sum and the activation are applied.
#include <algorithm>
#include <cmath>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernels/contrib_nchwc.h"
#include "ir/ops/contrib_nchwc.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {
namespace {

struct OrtNchwcConv {
  int64_t block = 0, inChannels = 0, outChannels = 0;
  bool plainInput = false;  // X is NCHW with fewer channels than a block
  bool tanh = false;        // the activation kiln's epilogues lack, applied after the others
  Activation act;
  std::shared_ptr<const Tensor> weights;  // OIHW
  std::shared_ptr<StagedKernel> blocked;  // kiln::NchwcConv on 5-D views (block 16)
  std::shared_ptr<StagedKernel> nchw;     // the ONNX Conv on NCHW tensors (no activation)
};

// A borrowed constant (the engine keeps it alive).
std::shared_ptr<const Tensor> borrowed(const Tensor* t) {
  return t ? std::shared_ptr<const Tensor>(std::shared_ptr<const Tensor>(), t) : nullptr;
}

const Tensor& constantFilter(const KernelCreateInfo& info) {
  const Tensor* w = info.constants.size() > 1 ? info.constants[1] : nullptr;
  if (!w) {
    ir::failNode(info.node,
                 "needs input 1 (W) as a constant (an initializer, reordered as "
                 "onnxruntime saves it); it is computed at run time here",
                 ErrorCode::kUnsupportedNode);
  }
  if (w->dtype() != DataType::kFloat32 || w->rank() != 4)
    ir::failNode(info.node,
                 "input 1 (W) must be float32 [Co, Ci / group, kH, kW], got " + w->describe());
  return *w;
}

// W back in OIHW order, after checking that it has a layout onnxruntime writes for this X.
std::shared_ptr<const Tensor> unreorderedFilter(const KernelCreateInfo& info, const Tensor& w,
                                                const OrtNchwcConv& c, int64_t group) {
  const int64_t inPerGroup = w.dim(1);
  const bool depthwise = group > 1 && inPerGroup == 1 && c.outChannels == group;
  if (c.outChannels % c.block != 0) {
    ir::failNode(info.node, "input 1 (W) " + w.describe() + " has " +
                                std::to_string(c.outChannels) +
                                " rows, not a multiple of the NCHWc block size " +
                                std::to_string(c.block) + " of this CPU");
  }
  const bool perOutputBlock = c.plainInput || depthwise;
  if (!perOutputBlock && inPerGroup % c.block != 0) {
    ir::failNode(info.node, "input 1 (W) " + w.describe() + " with group " + std::to_string(group) +
                                " has " + std::to_string(inPerGroup) +
                                " input channels per group, not a multiple of the block size " +
                                std::to_string(c.block));
  }
  const std::vector<float> oihw =
      ortFilterToOihw(w.data<float>(), c.outChannels, inPerGroup, w.dim(2) * w.dim(3), c.block,
                      perOutputBlock ? OrtFilterLayout::kOIHWBo : OrtFilterLayout::kOIHWBiBo);
  auto t = std::make_shared<Tensor>(DataType::kFloat32, w.shape());
  std::copy(oihw.begin(), oihw.end(), t->data<float>());
  return t;
}

ir::TypeInfo typeOf(const KernelCreateInfo& info, size_t i) {
  return i < info.inputTypes.size() && info.inputTypes[i] ? *info.inputTypes[i] : ir::TypeInfo{};
}

void removeActivation(ir::Node& node) {
  node.attrs.erase("activation");
  node.attrs.erase("activation_params");
}

void makeStages(const KernelCreateInfo& info, OrtNchwcConv& c) {
  const std::vector<std::shared_ptr<const Tensor>> constants = {
      nullptr, c.weights, borrowed(info.constants.size() > 2 ? info.constants[2] : nullptr)};
  const ir::TypeInfo w{DataType::kFloat32, ir::symShapeOf(c.weights->shape())};
  ir::TypeInfo x = typeOf(info, 0), sum = typeOf(info, 3);
  if (c.block == ir::kNchwcBlock) {
    if (!c.plainInput && x.shape) x.shape = kilnBlockedShape(*x.shape);
    if (sum.shape) sum.shape = kilnBlockedShape(*sum.shape);
    const bool tanh = c.tanh;
    c.blocked = StagedKernel::make(info, "kiln", "NchwcConv", 1, {x, w, typeOf(info, 2), sum},
                                   constants, [tanh](ir::Node& node) {
                                     if (tanh) removeActivation(node);
                                   });
    if (c.blocked) return;
  }
  c.nchw = StagedKernel::make(info, "", "Conv", 11, {typeOf(info, 0), w, typeOf(info, 2)},
                              constants, [](ir::Node& node) {
                                removeActivation(node);
                                if (node.inputs.size() > 3) node.inputs.resize(3);
                              });
  if (!c.nchw) ir::failNode(info.node, "no Conv kernel takes this node (internal error)");
}

void applyTanh(Tensor& y) {
  float* p = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) p[i] = std::tanh(p[i]);
}

void runBlocked(KernelContext& ctx, const OrtNchwcConv& c, const Tensor& x, Tensor& y) {
  const Tensor xView = c.plainInput ? x : x.reshaped(kilnBlockedShape(x.shape()));
  std::vector<const Tensor*> inputs = {&xView, c.weights.get(),
                                       ctx.hasInput(2) ? &ctx.input(2) : nullptr};
  Tensor sumView;
  if (ctx.hasInput(3)) {
    sumView = ctx.input(3).reshaped(kilnBlockedShape(ctx.input(3).shape()));
    inputs.push_back(&sumView);
  }
  c.blocked->runInto(std::move(inputs), y, kilnBlockedShape(y.shape()));
}

void runNchw(KernelContext& ctx, const OrtNchwcConv& c, const Tensor& x, Tensor& y) {
  const int64_t batch = x.dim(0), pixels = x.dim(2) * x.dim(3);
  std::vector<Tensor> scratch =
      scratchTensors(ctx, {c.plainInput ? Shape{0} : x.shape(), y.shape()});
  Tensor plain = c.plainInput ? x : scratch[0];
  if (!c.plainInput) {
    unblockChannels(x.data<float>(), plain.data<float>(), batch, c.inChannels, c.inChannels, pixels,
                    c.block, false);
  }
  Tensor& conv = scratch[1];
  c.nchw->runInto({&plain, c.weights.get(), ctx.hasInput(2) ? &ctx.input(2) : nullptr}, conv,
                  y.shape());
  blockChannels(conv.data<float>(), y.data<float>(), batch, c.outChannels, c.outChannels,
                y.dim(2) * y.dim(3), c.block, false);
  const float* sum = ctx.hasInput(3) ? ctx.input(3).data<float>() : nullptr;
  if (sum || c.act.kind != ActivationKind::kNone)
    applyEpilogue(c.act, y.data<float>(), y.numel(), 0.0f, sum);
}

void checkCall(const KernelContext& ctx, const OrtNchwcConv& c, const Tensor& x, const Tensor& y) {
  if (x.dtype() != DataType::kFloat32 || x.rank() != 4 || x.dim(1) != c.inChannels) {
    ctx.fail("input 0 (X) " + x.describe() + " must be float32 [N, " +
                 std::to_string(c.inChannels) + ", H, W] for W's input channels",
             ErrorCode::kInvalidArgument);
  }
  if (ctx.hasInput(3)) {
    const Tensor& sum = ctx.input(3);
    if (sum.dtype() != DataType::kFloat32 || sum.shape() != y.shape()) {
      ctx.fail("input 3 (Sum) " + sum.describe() + " must be float32 shaped like the output " +
                   y.describe(),
               ErrorCode::kInvalidArgument);
    }
  }
}

KernelFn makeOrtNchwcConv(const KernelCreateInfo& info) {
  const Tensor& w = constantFilter(info);
  auto c = std::make_shared<OrtNchwcConv>();
  c->block = ir::ortNchwcBlockSize();
  const int64_t group = ir::attrInt(info.node, "group", 1);
  c->outChannels = w.dim(0);
  c->inChannels = w.dim(1) * group;
  c->plainInput = c->inChannels < c->block;
  if (c->plainInput && group != 1)
    ir::failNode(info.node, "a grouped Conv needs a blocked X (a multiple of " +
                                std::to_string(c->block) + " channels)");
  c->tanh = ir::attrString(info.node, "activation", "") == "Tanh";
  ir::Node withoutTanh = info.node;
  if (c->tanh) removeActivation(withoutTanh);
  c->act = fusedActivationOf(withoutTanh);
  c->weights = unreorderedFilter(info, w, *c, group);
  makeStages(info, *c);
  return [c](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    checkCall(ctx, *c, x, y);
    if (y.numel() == 0) return;
    if (c->blocked)
      runBlocked(ctx, *c, x, y);
    else
      runNchw(ctx, *c, x, y);
    if (c->tanh) applyTanh(y);
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL_DOMAIN("com.microsoft.nchwc", "Conv", KernelFactory(makeOrtNchwcConv));

}  // namespace kiln::cpu
