// Shape and type rules of com.microsoft MoE and QMoE (version 1), the mixture-of-experts feed-
// forward layers of Mixtral / Phi-3.5-MoE / gpt-oss exports: output = input's shape and type,
// each token (a row of input [tokens, hidden] or [batch, sequence, hidden]) the sum over its top k
// experts (by the softmax of its router_probs row [tokens, experts]) of routing weight x
// fc2(activation(fc1(token))). MoE's weights are float32 [experts, out, in]; QMoE's are
// `expert_weight_bits`-bit integers (2, 4 or 8; packed along `in`, low bits first) with scales per
// output row or per block of `block_size` along `in`, and optional packed zero points. The
// attributes are checked here; the weights' shapes, which fix the expert and intermediate sizes,
// by the kernel (backends/cpu/kernels/contrib_moe.cpp).
#include "ir/shape_helpers.h"

namespace kiln::ir {
namespace {

bool isOneOf(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (s == o) return true;
  return false;
}

void checkMoEAttributes(const InferContext& ctx) {
  const Node& node = ctx.node();
  if (attrInt(node, "k", 1) < 1)
    ctx.fail("attribute 'k' must be 1 or more, got " + std::to_string(attrInt(node, "k", 1)));
  const std::string activation = attrString(node, "activation_type", "relu");
  if (!isOneOf(activation, {"relu", "gelu", "silu", "identity", "swiglu"})) {
    ctx.fail("activation_type '" + activation +
                 "' is not supported (kiln: relu, gelu, silu, identity, swiglu; relu2 and geglu "
                 "are onnxruntime's CUDA ones)",
             ErrorCode::kUnsupportedNode);
  }
  const int64_t fusion = attrInt(node, "swiglu_fusion", 0);
  if (fusion < 0 || fusion > 2)
    ctx.fail("attribute 'swiglu_fusion' must be 0, 1 or 2, got " + std::to_string(fusion));
  if (attrInt(node, "swiglu_limit_after_activation", 0) != 0) {
    ctx.fail(
        "attribute 'swiglu_limit_after_activation' 1 is not supported (onnxruntime: CUDA only)",
        ErrorCode::kUnsupportedNode);
  }
  if (activation == "swiglu" && fusion == 0 && !ctx.hasInput(node.opType == "QMoE" ? 8 : 6))
    ctx.fail("swiglu with swiglu_fusion 0 needs fc3_experts_weights");
}

void setMoEOutput(InferContext& ctx) {
  const SymShape* x = ctx.inputShape(0);
  if (x && x->size() != 2 && x->size() != 3) {
    ctx.fail("input must be [tokens, hidden] or [batch, sequence, hidden], got " +
             symShapeToString(*x));
  }
  const SymShape* router = ctx.inputShape(1);
  if (router && router->size() != 2)
    ctx.fail("router_probs must be 2-D [tokens, experts], got " + symShapeToString(*router));
  if (x) return ctx.setOutput(0, ctx.inputType(0), *x);
  ctx.setOutputType(0, ctx.inputType(0));
}

void requireType(const InferContext& ctx, size_t i, DataType want, const char* name) {
  if (ctx.hasInput(i) && ctx.inputType(i) != want) {
    ctx.fail(std::string(name) + " must be " + dataTypeName(want) + ", got " +
             dataTypeName(ctx.inputType(i)));
  }
}

void inferMoE(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 4}) ctx.requireInput(i);
  if (ctx.inputType(0) != DataType::kFloat32) {
    ctx.fail("input must be float32 (onnxruntime's CPU MoE: float32), got " +
                 dataTypeName(ctx.inputType(0)),
             ErrorCode::kUnsupportedNode);
  }
  const char* names[] = {"input",
                         "router_probs",
                         "fc1_experts_weights",
                         "fc1_experts_bias",
                         "fc2_experts_weights",
                         "fc2_experts_bias",
                         "fc3_experts_weights",
                         "fc3_experts_bias"};
  for (size_t i = 1; i < 8; ++i) requireType(ctx, i, DataType::kFloat32, names[i]);
  checkMoEAttributes(ctx);
  setMoEOutput(ctx);
}

void checkBits(const InferContext& ctx, const char* name, int64_t bits) {
  if (bits == 3) {
    ctx.fail(std::string("attribute '") + name + "' 3 (the INT3 profile) is not supported",
             ErrorCode::kUnsupportedNode);
  }
  if (bits != 2 && bits != 4 && bits != 8)
    ctx.fail(std::string("attribute '") + name + "' must be 2, 4 or 8, got " +
             std::to_string(bits));
}

void inferQMoE(InferContext& ctx) {
  for (size_t i : {0, 1, 2, 3, 5, 6}) ctx.requireInput(i);
  const Node& node = ctx.node();
  const DataType t = ctx.inputType(0);
  if (t != DataType::kFloat32 && t != DataType::kFloat16) {
    ctx.fail("input must be float32 or float16, got " + dataTypeName(t),
             ErrorCode::kUnsupportedNode);
  }
  const std::string quantType = attrString(node, "quant_type", "int");
  if (quantType != "int") {
    ctx.fail("quant_type '" + quantType + "' is not supported (kiln: 'int')",
             ErrorCode::kUnsupportedNode);
  }
  const int64_t prepacked = attrInt(node, "weights_prepacked", -1);
  if (prepacked != -1 && prepacked != 0) {
    ctx.fail("attribute 'weights_prepacked' " + std::to_string(prepacked) +
                 " is not supported (kiln reads the raw [experts, out, in * bits / 8] weights)",
             ErrorCode::kUnsupportedNode);
  }
  const int64_t bits = attrInt(node, "expert_weight_bits", 4);
  checkBits(ctx, "expert_weight_bits", bits);
  for (const char* name :
       {"fc1_expert_weight_bits", "fc2_expert_weight_bits", "fc3_expert_weight_bits"})
    checkBits(ctx, name, attrInt(node, name, bits));
  const int64_t blockSize = attrInt(node, "block_size", 0);
  if (blockSize != 0 && (blockSize < 16 || (blockSize & (blockSize - 1)) != 0)) {
    ctx.fail("attribute 'block_size' must be a power of 2 of at least 16, got " +
             std::to_string(blockSize));
  }
  for (size_t i : {1, 4, 7, 10, 14}) requireType(ctx, i, t, "router, bias and router_weights");
  for (size_t i : {3, 6, 9}) requireType(ctx, i, t, "the scales");
  for (size_t i : {2, 5, 8, 11, 12, 13})
    requireType(ctx, i, DataType::kUint8, "weights and zero points");
  for (size_t i = 15; i < ctx.numInputs(); ++i) {
    if (ctx.hasInput(i)) {
      ctx.fail("input " + std::to_string(i) +
                   " (global, activation or block scales of the fp4 / fp8 modes) is not supported",
               ErrorCode::kUnsupportedNode);
    }
  }
  checkMoEAttributes(ctx);
  setMoEOutput(ctx);
}

}  // namespace

KILN_REGISTER_OP_SCHEMA({"com.microsoft", "MoE", 1, 1000, inferMoE});
KILN_REGISTER_OP_SCHEMA({"com.microsoft", "QMoE", 1, 1000, inferQMoE});

}  // namespace kiln::ir
