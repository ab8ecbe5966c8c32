// Running an ONNX op's CPU kernel inside another op's kernel (com.microsoft ops built on ONNX ops).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace kiln::cpu {

/// An ONNX op's CPU kernel made for a copy of the node (same attributes) at `opset`, run on
/// stand-in inputs: the float stage of a quantized op, or an op on another layout's data.
class OnnxStage {
 public:
  /// An input type of dtype kUndefined stands for an omitted input. `adjust` may change the
  /// copy's attributes before the kernel reads them; `constants` (none by
  /// default) are the values of constant inputs, for kernels that pack them.
  OnnxStage(const KernelCreateInfo& info, const char* opType, int64_t opset,
            std::vector<ir::TypeInfo> inputTypes, const std::function<void(ir::Node&)>& adjust = {},
            std::vector<const Tensor*> constants = {})
      : node_(std::make_shared<ir::Node>(info.node)),
        types_(std::make_shared<std::vector<ir::TypeInfo>>(std::move(inputTypes))) {
    node_->domain = "";
    node_->opType = opType;
    node_->opset = opset;
    if (adjust) adjust(*node_);
    const KernelFactory* factory = KernelRegistry::global().find("", opType);
    if (!factory)
      ir::failNode(info.node, std::string("needs the ") + opType + " CPU kernel (internal error)");
    constants.resize(types_->size(), nullptr);
    KernelCreateInfo inner{*node_, {}, std::move(constants), {}, info.subgraphs};
    for (const ir::TypeInfo& t : *types_)
      inner.inputTypes.push_back(t.dtype == DataType::kUndefined ? nullptr : &t);
    fn_ = (*factory)(inner);
    node_->attrs.clear();  // the kernel has read them; the copy now only names the node in errors
  }
  /// The op's output, of `dtype` and the node's output shape.
  Tensor run(KernelContext& ctx, std::vector<const Tensor*> inputs, DataType dtype) const {
    return run(ctx, std::move(inputs), dtype, ctx.output(0).shape());
  }
  /// The op's output, of `dtype` and `shape`.
  Tensor run(const KernelContext& ctx, std::vector<const Tensor*> inputs, DataType dtype,
             const Shape& shape) const {
    std::vector<Tensor> outputs(1);
    const std::vector<ir::TypeInfo> types = {ir::TypeInfo{dtype, ir::symShapeOf(shape)}};
    KernelContext inner(*node_, std::move(inputs), outputs, types);
    fn_(inner);
    return outputs[0];
  }
  /// Every output of the op, of these types (a shape the kernel finds from the data may be left
  /// unknown); a default Tensor for an output the staged node omits.
  std::vector<Tensor> runAll(std::vector<const Tensor*> inputs,
                             const std::vector<ir::TypeInfo>& outputTypes) const {
    std::vector<Tensor> outputs(outputTypes.size());
    KernelContext inner(*node_, std::move(inputs), outputs, outputTypes);
    fn_(inner);
    return outputs;
  }

 private:
  std::shared_ptr<ir::Node> node_;  // the staged op's identity (name, op, outputs) for its context
  std::shared_ptr<std::vector<ir::TypeInfo>> types_;
  KernelFn fn_;
};

}  // namespace kiln::cpu
