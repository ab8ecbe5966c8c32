// Layout moves and staged kernels shared by the com.microsoft.nchwc CPU kernels
// (contrib_nchwc.h).
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/contrib_nchwc.h"
#include "backends/cpu/thread_pool.h"
#include "ir/ops/nchwc.h"

namespace kiln::cpu {

namespace {

// Runs fn(image, block) over every (image, channel block) pair on the pool.
void forEachBlock(int64_t batch, int64_t blocks, int64_t floatsPerBlock,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t tasks = batch * blocks;
  parallelForAtLeast(
      tasks, std::max<int64_t>(1, kMinElementsPerThread / std::max<int64_t>(1, floatsPerBlock)),
      [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) fn(t / blocks, t % blocks);
      });
}

}  // namespace

void blockChannels(const float* plain, float* blocked, int64_t batch, int64_t channels,
                   int64_t padded, int64_t pixels, int64_t block, bool channelsLast) {
  const int64_t blocks = padded / block;
  forEachBlock(batch, blocks, pixels * block, [&](int64_t n, int64_t b) {
    float* dst = blocked + (n * blocks + b) * pixels * block;
    const int64_t c0 = b * block, count = std::clamp<int64_t>(channels - c0, 0, block);
    for (int64_t p = 0; p < pixels; ++p) {
      float* pixel = dst + p * block;
      if (channelsLast) {
        const float* src = plain + (n * pixels + p) * channels + c0;
        std::copy(src, src + count, pixel);
      } else {
        const float* src = plain + (n * channels + c0) * pixels + p;
        for (int64_t c = 0; c < count; ++c) pixel[c] = src[c * pixels];
      }
      std::fill(pixel + count, pixel + block, 0.0f);
    }
  });
}

void unblockChannels(const float* blocked, float* plain, int64_t batch, int64_t channels,
                     int64_t padded, int64_t pixels, int64_t block, bool channelsLast) {
  const int64_t blocks = padded / block;
  forEachBlock(batch, blocks, pixels * block, [&](int64_t n, int64_t b) {
    const float* src = blocked + (n * blocks + b) * pixels * block;
    const int64_t c0 = b * block, count = std::clamp<int64_t>(channels - c0, 0, block);
    for (int64_t p = 0; p < pixels; ++p) {
      const float* pixel = src + p * block;
      if (channelsLast) {
        std::copy(pixel, pixel + count, plain + (n * pixels + p) * channels + c0);
      } else {
        float* dst = plain + (n * channels + c0) * pixels + p;
        for (int64_t c = 0; c < count; ++c) dst[c * pixels] = pixel[c];
      }
    }
  });
}

ir::SymShape kilnBlockedShape(const ir::SymShape& s) {
  const ir::Dim blocks =
      s[1].isKnown() ? ir::Dim::known(s[1].value / ir::kNchwcBlock) : ir::Dim::unknown();
  return {s[0], blocks, s[2], s[3], ir::Dim::known(ir::kNchwcBlock)};
}

Shape kilnBlockedShape(const Shape& s) {
  return {s[0], s[1] / ir::kNchwcBlock, s[2], s[3], ir::kNchwcBlock};
}

std::vector<Tensor> scratchTensors(KernelContext& ctx, const std::vector<Shape>& shapes) {
  auto aligned = [](uint64_t bytes) { return (bytes + 63) / 64 * 64; };
  uint64_t total = 0;
  for (const Shape& s : shapes) total += aligned(static_cast<uint64_t>(shapeNumel(s)) * 4);
  auto* base = static_cast<uint8_t*>(ctx.workspace(total));
  std::vector<Tensor> tensors;
  for (const Shape& s : shapes) {
    tensors.push_back(Tensor::wrap(DataType::kFloat32, s, base, nullptr));
    base += aligned(static_cast<uint64_t>(shapeNumel(s)) * 4);
  }
  return tensors;
}

std::vector<float> ortFilterToOihw(const float* w, int64_t outChannels, int64_t inPerGroup,
                                   int64_t taps, int64_t block, OrtFilterLayout layout) {
  std::vector<float> oihw(static_cast<size_t>(outChannels * inPerGroup * taps));
  const int64_t inBlocks = inPerGroup / block;
  for (int64_t o = 0; o < outChannels; ++o) {
    const int64_t ob = o / block, bo = o % block;
    for (int64_t i = 0; i < inPerGroup; ++i) {
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t from =
            layout == OrtFilterLayout::kOIHWBo
                ? ((ob * inPerGroup + i) * taps + k) * block + bo
                : ((((ob * inBlocks + i / block) * taps + k) * block + i % block) * block) + bo;
        oihw[static_cast<size_t>((o * inPerGroup + i) * taps + k)] = w[from];
      }
    }
  }
  return oihw;
}

std::shared_ptr<StagedKernel> StagedKernel::make(
    const KernelCreateInfo& info, const std::string& domain, const std::string& opType,
    int64_t opset, std::vector<ir::TypeInfo> inputTypes,
    std::vector<std::shared_ptr<const Tensor>> constants,
    const std::function<void(ir::Node&)>& adjust) {
  auto staged = std::make_shared<StagedKernel>();
  staged->node_ = std::make_shared<ir::Node>(info.node);
  ir::Node& node = *staged->node_;
  node.domain = domain;
  node.opType = opType;
  node.opset = opset;
  if (adjust) adjust(node);
  staged->types_ = std::move(inputTypes);
  staged->constants_ = std::move(constants);
  staged->constants_.resize(staged->types_.size());
  KernelCreateInfo inner{node, {}, {}, {}, info.subgraphs};
  for (size_t i = 0; i < staged->types_.size(); ++i) {
    const ir::TypeInfo& t = staged->types_[i];
    inner.inputTypes.push_back(t.dtype == DataType::kUndefined ? nullptr : &t);
    inner.constants.push_back(staged->constants_[i].get());
  }
  const KernelSelection selection = KernelRegistry::global().select(inner);
  if (!selection.chosen) return nullptr;
  staged->fn_ = KernelRegistry::create(inner, selection).run;
  node.attrs.clear();  // read by the kernel; the copy now only names the node in errors
  return staged;
}

void StagedKernel::runInto(std::vector<const Tensor*> inputs, Tensor& out,
                           const Shape& shape) const {
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> types = {ir::TypeInfo{DataType::kFloat32, ir::symShapeOf(shape)}};
  const std::vector<OutputStorage> planned = {OutputStorage{out.raw(), out.byteSize(), nullptr}};
  KernelContext inner(*node_, std::move(inputs), outputs, types, &planned);
  fn_(inner);
  if (outputs[0].raw() != out.raw()) std::memcpy(out.raw(), outputs[0].raw(), out.byteSize());
}

}  // namespace kiln::cpu
