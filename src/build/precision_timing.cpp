// kBF16 allows BF16 kernels; whether one is faster than the FP32 kernel a layer would otherwise
// get depends on the CPU (vdpbf16ps does twice the multiplies of an FMA per instruction, but not
// every CPU issues it as often) and on the layer (BF16 halves the weights' bytes, which pays where
// they stream from memory). So the builder times both, as TensorRT times its tactics: each on the
// same random inputs at the first profile's opt shapes, on a pool of the engine's threads, best
// of a few alternating runs; the layer keeps BF16 only where it is clearly faster.
#include <algorithm>
#include <random>

#include <cstdio>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/thread_pool.h"
#include "build/layer_timing.h"
#include "build/precision.h"
#include "build/profiles.h"
#include "engine/plan_format.h"
#include "ir/op_schema.h"
#include "ir/precision.h"
#include "ir/sym_shape.h"

namespace kiln::build {
namespace {

constexpr int kRounds = 5;  // alternating runs of each kernel after one warm-up run
// BF16 is kept only when at least this much faster: within it the two are the same speed as
// far as single timed runs can tell, and FP32 is the more accurate.
constexpr double kBf16Margin = 0.95;

// Seconds of the best of kRounds runs of each kernel, alternating (after a warm-up run of each).
std::pair<double, double> timeBoth(const ir::Node& node, const ir::OpSchema& schema,
                                   const cpu::Kernel& a, const cpu::Kernel& b,
                                   const std::vector<const Tensor*>& inputs) {
  KernelRuns runsA(node, schema, a, inputs), runsB(node, schema, b, inputs);
  runsA.timeOnce();
  runsB.timeOnce();
  double bestA = 1e30, bestB = 1e30;
  for (int r = 0; r < kRounds; ++r) {
    bestA = std::min(bestA, runsA.timeOnce());
    bestB = std::min(bestB, runsB.timeOnce());
  }
  return {bestA, bestB};
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f ms", seconds * 1e3);
  return text;
}

}  // namespace

std::vector<std::string> timePrecisions(ir::Graph& graph, const plan::Profile& profile, int threads,
                                        const PrecisionRequest& request, ILogger& logger) {
  std::vector<std::string> decisions;
  if (!request.bf16) return decisions;
  std::optional<ir::Graph> concrete;
  bool triedShapes = false;
  cpu::ThreadPool pool(std::max(threads, 1));
  cpu::ThreadPoolScope scope(threads > 1 ? &pool : nullptr);
  std::mt19937 rng(1);
  const cpu::KernelRegistry& registry = cpu::KernelRegistry::global();
  for (ir::Node& node : graph.nodes) {
    if (ir::nodePrecision(node) != ir::kPrecisionBf16) continue;
    std::string who;
    if (pinnedPrecision(node, request, &who) == DataType::kBFloat16) continue;
    const cpu::KernelCreateInfo info = timingCreateInfo(graph, node);
    const cpu::KernelSelection bf16 = registry.select(info);
    if (!bf16.chosen || bf16.chosen->id.rfind("bf16_", 0) != 0)
      continue;  // settlePrecisions reports it
    ir::Node fp32Node = node;
    fp32Node.attrs[ir::kPrecisionAttr] = ir::kPrecisionFp32;
    const cpu::KernelCreateInfo fp32Info = timingCreateInfo(graph, fp32Node);
    const cpu::KernelSelection fp32 = registry.select(fp32Info);
    if (!fp32.chosen) continue;
    if (!triedShapes) {
      concrete = graphAtOptShapes(graph, profile);
      triedShapes = true;
    }
    if (!concrete) break;
    std::vector<Tensor> made;
    const auto inputs = timingInputs(*concrete, node, info, rng, made);
    const ir::OpSchema* schema =
        ir::OpSchemaRegistry::global().find(node.domain, node.opType, node.opset);
    if (!inputs || !schema) continue;
    const cpu::Kernel bf16Kernel = bf16.chosen->create(info);
    const cpu::Kernel fp32Kernel = fp32.chosen->create(fp32Info);
    const auto [tb, tf] = timeBoth(node, *schema, bf16Kernel, fp32Kernel, *inputs);
    const std::string times =
        bf16.chosen->id + " " + ms(tb) + ", " + fp32.chosen->id + " " + ms(tf);
    if (tb < kBf16Margin * tf) {
      decisions.push_back(node.label() + ": precision bf16: faster (" + times + ")");
    } else {
      node.attrs[ir::kPrecisionAttr] = ir::kPrecisionFp32;
      decisions.push_back(node.label() + ": precision fp32: BF16 is not 5 % faster (" + times +
                          ")");
    }
    logger.log(Severity::kVERBOSE, decisions.back());
  }
  return decisions;
}

}  // namespace kiln::build
