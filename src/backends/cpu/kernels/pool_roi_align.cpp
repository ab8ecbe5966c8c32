// CPU kernel for RoiAlign: each ROI bin averages (or takes the max of) bilinear samples of X.
#include <algorithm>
#include <array>
#include <cmath>

#include "backends/cpu/kernels/elementwise_util.h"
#include "core/tensor_limits.h"

namespace kiln::cpu {
namespace {

// One bilinear sample: four flat positions in an H x W plane and their weights.
struct Sample {
  std::array<int64_t, 4> pos{};
  std::array<double, 4> weight{};
};

Sample bilinearSample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width))
    return s;  // outside: zero
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= height - 1) {
    y0 = y1 = height - 1;
    y = static_cast<double>(y0);
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = static_cast<double>(x0);
  }
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  s.pos = {y0 * width + x0, y0 * width + x1, y1 * width + x0, y1 * width + x1};
  s.weight = {hy * hx, hy * lx, ly * hx, ly * lx};
  return s;
}

struct RoiAlignParams {
  int64_t outH = 1, outW = 1, samplingRatio = 0;
  double scale = 1.0;
  bool maxMode = false;
  bool halfPixel = true;
};

template <typename T>
void roiAlign(const KernelContext& ctx, const Tensor& x, const Tensor& rois,
              const Tensor& batchIndices, Tensor& y, const RoiAlignParams& p) {
  using C = ComputeType<T>;
  const int64_t batch = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const double offset = p.halfPixel ? 0.5 : 0.0;
  std::vector<Sample> samples;
  for (int64_t r = 0; r < rois.dim(0); ++r) {
    const int64_t b = batchIndices.intAt(r);
    if (b < 0 || b >= batch)
      ctx.fail("batch index " + std::to_string(b) + " is out of range",
               ErrorCode::kInvalidArgument);
    for (int64_t k = 0; k < 4; ++k) {
      // NaN would pass every range test below (and be cast to an integer); infinity would ask
      // for an unbounded sampling grid.
      if (!std::isfinite(rois.doubleAt(r * 4 + k)))
        ctx.fail("rois row " + std::to_string(r) + " has a non-finite coordinate (" +
                     std::to_string(rois.doubleAt(r * 4 + k)) + ")",
                 ErrorCode::kInvalidArgument);
    }
    const double startW = rois.doubleAt(r * 4) * p.scale - offset;
    const double startH = rois.doubleAt(r * 4 + 1) * p.scale - offset;
    double roiW = rois.doubleAt(r * 4 + 2) * p.scale - offset - startW;
    double roiH = rois.doubleAt(r * 4 + 3) * p.scale - offset - startH;
    if (!p.halfPixel) {
      roiW = std::max(roiW, 1.0);
      roiH = std::max(roiH, 1.0);
    }
    const double binH = roiH / static_cast<double>(p.outH),
                 binW = roiW / static_cast<double>(p.outW);
    // The adaptive grid is the bin's size in pixels: bounded before it is cast (a scaled
    // coordinate may overflow to infinity, or ask for more samples than memory holds).
    auto gridOf = [&](double bin, const char* axis) -> int64_t {
      const double g = p.samplingRatio > 0 ? static_cast<double>(p.samplingRatio) : std::ceil(bin);
      if (!(g <= double(int64_t{1} << 24)))
        ctx.fail("rois row " + std::to_string(r) + ": a bin " + std::to_string(bin) + " pixels " +
                     axis + " with sampling_ratio " + std::to_string(p.samplingRatio) +
                     " would take " + std::to_string(g) + " samples per bin on that axis",
                 ErrorCode::kInvalidArgument);
      return static_cast<int64_t>(std::max(g, 0.0));
    };
    const int64_t gridH = gridOf(binH, "high"), gridW = gridOf(binW, "wide");
    const double count = static_cast<double>(std::max<int64_t>(gridH * gridW, 1));
    samples.clear();
    const double sampleBytes = static_cast<double>(p.outH * p.outW) * static_cast<double>(gridH) *
                               static_cast<double>(gridW) * sizeof(Sample);
    checkAllocation(sampleBytes < 0x1p63 ? static_cast<uint64_t>(sampleBytes) : UINT64_MAX, [&] {
      return "the bilinear samples of rois row " + std::to_string(r) + " (a " +
             std::to_string(gridH) + "x" + std::to_string(gridW) + " sampling grid per bin)";
    });
    for (int64_t ph = 0; ph < p.outH; ++ph) {
      for (int64_t pw = 0; pw < p.outW; ++pw) {
        for (int64_t iy = 0; iy < gridH; ++iy) {
          const double sy = startH + ph * binH + (iy + 0.5) * binH / static_cast<double>(gridH);
          for (int64_t ix = 0; ix < gridW; ++ix) {
            const double sx = startW + pw * binW + (ix + 0.5) * binW / static_cast<double>(gridW);
            samples.push_back(bilinearSample(sy, sx, height, width));
          }
        }
      }
    }
    const size_t perBin = static_cast<size_t>(gridH * gridW);
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = x.data<T>() + (b * channels + c) * height * width;
      T* out = y.data<T>() + (r * channels + c) * p.outH * p.outW;
      for (int64_t bin = 0; bin < p.outH * p.outW; ++bin) {
        double acc = 0;
        for (size_t k = 0; k < perBin; ++k) {
          const Sample& s = samples[static_cast<size_t>(bin) * perBin + k];
          if (p.maxMode) {
            double v = s.weight[0] * static_cast<double>(C(plane[s.pos[0]]));
            for (int j = 1; j < 4; ++j)
              v = std::max(v, s.weight[j] * static_cast<double>(C(plane[s.pos[j]])));
            acc = k == 0 ? v : std::max(acc, v);
          } else {
            for (int j = 0; j < 4; ++j)
              acc += s.weight[j] * static_cast<double>(C(plane[s.pos[j]]));
          }
        }
        out[bin] = static_cast<T>(static_cast<C>(p.maxMode ? acc : acc / count));
      }
    }
  }
}

KernelFn makeRoiAlign(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  RoiAlignParams p;
  p.outH = ir::attrInt(node, "output_height", 1);
  p.outW = ir::attrInt(node, "output_width", 1);
  p.samplingRatio = ir::attrInt(node, "sampling_ratio", 0);
  p.scale = ir::attrFloat(node, "spatial_scale", 1.0f);
  p.maxMode = ir::attrString(node, "mode", "avg") == "max";
  // Opset 10 had no coordinate_transformation_mode and behaved as output_half_pixel.
  const std::string transform =
      ir::attrString(node, "coordinate_transformation_mode",
                     node.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    ir::failNode(node, "unknown coordinate_transformation_mode '" + transform + "'");
  }
  p.halfPixel = transform == "half_pixel";
  return [p](KernelContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& batchIndices = ctx.input(2);
    if (rois.rank() != 2 || rois.dim(1) != 4)
      ctx.fail("rois must have shape [num_rois, 4]", ErrorCode::kInvalidArgument);
    if (batchIndices.numel() != rois.dim(0))
      ctx.fail("batch_indices must have one value per roi", ErrorCode::kInvalidArgument);
    Tensor& y = ctx.output(0);
    dispatchFloat(x.dtype(), "RoiAlign", [&](auto tag) {
      roiAlign<typename decltype(tag)::type>(ctx, x, rois, batchIndices, y, p);
    });
  };
}

KILN_REGISTER_CPU_KERNEL("RoiAlign", KernelFactory(makeRoiAlign));

}  // namespace
}  // namespace kiln::cpu
