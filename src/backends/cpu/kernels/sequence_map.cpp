// SequenceMap (opset 17): runs the body once per element of the input sequence. Additional inputs
// that are sequences (of the same length) are mapped element-wise; tensors go whole to every run.
// Outer-scope values the body reads are the node's implicit inputs, as for Loop.
#include <memory>

#include "backends/cpu/kernel.h"
#include "backends/cpu/subgraph_runner.h"
#include "ir/ops/sequence_map.h"

namespace kiln::cpu {
namespace {

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* p = static_cast<const uint8_t*>(a.raw());
  const auto* q = static_cast<const uint8_t*>(b.raw());
  return p && q && a.byteSize() && b.byteSize() && p < q + b.byteSize() && q < p + a.byteSize();
}

KernelFn makeSequenceMap(const KernelCreateInfo& info) {
  std::shared_ptr<const SubgraphRunner> body = makeBodyRunner(info, "body");
  std::vector<DataType> elementTypes;
  for (const ir::TypeInfo& t :
       ir::sequenceMapElementTypes(info.node, body->graph(), info.inputTypes))
    elementTypes.push_back(t.dtype);
  return [body, elementTypes, explicitInputs = info.node.numExplicitInputs()](KernelContext& ctx) {
    const Tensor& first = ctx.input(0);
    if (!first.isSequence())
      ctx.fail("input 0 must be a sequence, got " + first.describe(), ErrorCode::kInvalidArgument);
    const size_t count = first.sequenceItems().size();
    // Tensors the body may hand back unchanged (broadcast and outer-scope inputs) may live in the
    // memory arena, whose slots are reused: such outputs are copied before joining a sequence.
    std::vector<const Tensor*> wholeTensors;
    for (size_t i = 1; i < explicitInputs; ++i) {
      const Tensor& x = ctx.input(i);
      if (x.isSequence() && x.sequenceItems().size() != count) {
        ctx.fail("input " + std::to_string(i) + " is a sequence of " +
                     std::to_string(x.sequenceItems().size()) + " tensors but input 0 has " +
                     std::to_string(count) + "; sequences are mapped element-wise",
                 ErrorCode::kInvalidArgument);
      }
      if (x.isNone())
        ctx.fail("input " + std::to_string(i) + " is an empty optional",
                 ErrorCode::kInvalidArgument);
      if (!x.isSequence()) wholeTensors.push_back(&x);
    }
    std::vector<const Tensor*> outer;
    for (size_t i = explicitInputs; i < ctx.numInputs(); ++i) {
      outer.push_back(ctx.hasInput(i) ? &ctx.input(i) : nullptr);
      if (outer.back() && !outer.back()->isSequence()) wholeTensors.push_back(outer.back());
    }
    std::vector<std::vector<Tensor>> results(ctx.numOutputs());
    std::vector<Tensor> bodyInputs(explicitInputs);
    for (size_t n = 0; n < count; ++n) {
      for (size_t i = 0; i < explicitInputs; ++i) {
        const Tensor& x = ctx.input(i);
        bodyInputs[i] = x.isSequence() ? x.sequenceItems()[n] : x;
      }
      std::vector<Tensor> outs = body->run(bodyInputs, outer);
      for (size_t k = 0; k < results.size(); ++k) {
        Tensor& item = outs.at(k);
        if (item.isSequence() || item.isNone()) {
          ctx.fail("body output " + std::to_string(k) + " is " + item.describe() +
                   "; it must be a tensor");
        }
        for (const Tensor* whole : wholeTensors)
          if (overlaps(item, *whole)) item = item.clone();
        results[k].push_back(std::move(item));
      }
    }
    for (size_t k = 0; k < results.size(); ++k) {
      DataType dtype = k < elementTypes.size() ? elementTypes[k] : DataType::kUndefined;
      if (!results[k].empty()) dtype = results[k][0].dtype();
      if (dtype == DataType::kUndefined) {
        ctx.fail("cannot tell the element type of output " + std::to_string(k) +
                 ": the input sequence is empty and the body does not declare it");
      }
      if (ctx.wantsOutput(k)) ctx.setOutput(k, Tensor::sequence(dtype, std::move(results[k])));
    }
  };
}

}  // namespace

KILN_REGISTER_CPU_KERNEL("SequenceMap", KernelFactory(makeSequenceMap));

}  // namespace kiln::cpu
