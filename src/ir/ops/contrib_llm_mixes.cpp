// Shape and type rules of onnxruntime's hyper-connection ops (com.microsoft 1; kernels in
// backends/cpu/kernels/contrib_llm_mixes.cpp), C streams of H features (hyper_connection_shapes.h):
//   HyperConnectionPreMix(streams, pre_mix) -> (..., H):
//     y[.., h] = reduction_scale * sum_c streams[.., c, h] * pre_mix[.., c(, h)]
//   HyperConnectionPostMix(streams, block_output (..., H), post_mix, [stream_mix (..., C, C)])
//     -> streams' shape: y[.., k, h] = sum_c stream_mix[.., c, k] * streams[.., c, h]
//        + post_mix[.., k(, h)] * block_output[.., h]; no stream_mix: streams[.., k, h]
#include "ir/ops/hyper_connection_shapes.h"
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

void requireMixFloat(const InferContext& ctx, size_t i, const char* name) {
  if (!ctx.hasInput(i)) return;
  const DataType t = ctx.inputType(i);
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16) {
    ctx.fail(std::string(name) + " must be float32, float16 or bfloat16, got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  }
}

// The streams' layout when input 0's shape is known (always at run time); fails when it is bad.
std::optional<StreamShape> streamsOf(const InferContext& ctx) {
  const auto shape = ctx.inputConcreteShape(0);
  if (!shape) return std::nullopt;
  StreamShape p;
  const std::string error = resolveStreams(*shape, attrInt(ctx.node(), "num_branches", 0), p);
  if (!error.empty()) ctx.fail(error + ", got streams " + shapeToString(*shape));
  return p;
}

void requireGate(const InferContext& ctx, const StreamShape& p, size_t i, const char* name,
                 bool allowFlatFeature) {
  const auto gate = ctx.inputConcreteShape(i);
  if (!gate) return;
  GateLayout layout;
  const std::string error =
      resolveGate(*gate, *ctx.inputConcreteShape(0), p, allowFlatFeature, layout);
  if (!error.empty()) ctx.fail(std::string(name) + " " + shapeToString(*gate) + " " + error);
}

void inferPreMix(InferContext& ctx) {
  for (size_t i : {0, 1}) ctx.requireInput(i);
  requireMixFloat(ctx, 0, "streams");
  requireMixFloat(ctx, 1, "pre_mix");
  const DataType type = ctx.inputType(0);
  const auto p = streamsOf(ctx);
  if (!p) return ctx.setOutputType(0, type);
  requireGate(ctx, *p, 1, "pre_mix", true);
  ctx.setOutput(0, type, p->reduced);
}

void inferPostMix(InferContext& ctx) {
  for (size_t i : {0, 1, 2}) ctx.requireInput(i);
  requireMixFloat(ctx, 0, "streams");
  if (ctx.inputType(1) != ctx.inputType(0)) {
    ctx.fail("block_output must have the streams' type " + dataTypeName(ctx.inputType(0)) +
             ", got " + dataTypeName(ctx.inputType(1)));
  }
  requireMixFloat(ctx, 2, "post_mix");
  requireMixFloat(ctx, 3, "stream_mix");
  const auto p = streamsOf(ctx);
  if (p) {
    const auto block = ctx.inputConcreteShape(1);
    if (block && *block != p->reduced) {
      ctx.fail("block_output " + shapeToString(*block) + " must be " + shapeToString(p->reduced) +
               " (the streams' leading dimensions, then H)");
    }
    requireGate(ctx, *p, 2, "post_mix", false);
    const auto mix = ctx.hasInput(3) ? ctx.inputConcreteShape(3) : std::nullopt;
    Shape want(p->reduced.begin(), p->reduced.end() - 1);
    want.push_back(p->branches);
    want.push_back(p->branches);
    if (mix && *mix != want)
      ctx.fail("stream_mix " + shapeToString(*mix) + " must be " + shapeToString(want));
  }
  inferSameAsInput0(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "HyperConnectionPreMix", 1, 1000, inferPreMix});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "HyperConnectionPostMix", 1, 1000, inferPostMix});

}  // namespace kiln::ir
