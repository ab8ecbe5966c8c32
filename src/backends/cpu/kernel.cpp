#include "backends/cpu/kernel.h"

#include <cstdlib>

#include "core/aligned_memory.h"
#include "core/tensor_limits.h"
#include "ir/op_schema.h"

namespace kiln::cpu {

namespace {

// Output i in the storage the memory plan gave it when it fits there, else in a tensor of its own.
Tensor plannedOrNewTensor(const std::vector<OutputStorage>* planned, size_t i, DataType dtype,
                          Shape shape) {
  if (planned && i < planned->size() && dtype != DataType::kString && dataTypeSize(dtype) != 0) {
    const OutputStorage& slot = (*planned)[i];
    if (slot.data && static_cast<uint64_t>(shapeNumel(shape)) <= slot.bytes / dataTypeSize(dtype)) {
      return Tensor::wrap(dtype, std::move(shape), slot.data, slot.owner);
    }
  }
  return Tensor(dtype, std::move(shape));  // data-dependent size, or nothing planned
}

}  // namespace

KernelContext::KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs,
                             std::vector<Tensor>& outputs,
                             const std::vector<ir::TypeInfo>& outputTypes,
                             const std::vector<OutputStorage>* planned)
    : node_(node),
      inputs_(std::move(inputs)),
      outputs_(outputs),
      outputTypes_(outputTypes),
      planned_(planned) {}

KernelContext::KernelContext(const KernelContext& outer, std::vector<const Tensor*> inputs,
                             std::vector<Tensor>& outputs,
                             const std::vector<ir::TypeInfo>& outputTypes)
    : KernelContext(outer.node_, std::move(inputs), outputs, outputTypes) {}

const Tensor& KernelContext::input(size_t i) const {
  if (!hasInput(i)) fail("input " + std::to_string(i) + " is required", ErrorCode::kInvalidModel);
  return *inputs_[i];
}

Tensor& KernelContext::output(size_t i) {
  Tensor& t = outputs_.at(i);
  if (t.defined()) return t;
  const ir::TypeInfo& type = outputTypes_.at(i);
  auto shape = type.shape ? ir::concreteShape(*type.shape) : std::nullopt;
  if (!shape || type.dtype == DataType::kUndefined) {
    fail("output " + std::to_string(i) + " has no inferred shape (internal error)");
  }
  t = makeOutput(i, type.dtype, std::move(*shape));
  return t;
}

Tensor& KernelContext::allocateOutput(size_t i, DataType dtype, Shape shape) {
  outputs_.at(i) = makeOutput(i, dtype, std::move(shape));
  return outputs_[i];
}

Tensor KernelContext::makeOutput(size_t i, DataType dtype, Shape shape) const {
  try {
    return plannedOrNewTensor(planned_, i, dtype, std::move(shape));
  } catch (const Error& e) {  // a shape too large to hold, computed from run-time values
    std::string output = "output " + std::to_string(i);
    if (outputNames_ && i < outputNames_->size() && !(*outputNames_)[i].empty())
      output += " '" + (*outputNames_)[i] + "'";
    fail(output + ": " + e.what(), e.code());
  }
}

void KernelContext::setOutput(size_t i, Tensor tensor) { outputs_.at(i) = std::move(tensor); }

void KernelContext::fail(const std::string& message, ErrorCode code) const {
  ir::failNode(node_, message, code);
}

void* KernelContext::workspace(uint64_t bytes) {
  if (bytes == 0) return nullptr;
  if (workspace_ && workspaceBytes_ >= bytes) return workspace_;
  if (heapWorkspaceBytes_ < bytes) {
    try {
      checkAllocation(bytes, [] { return std::string("its workspace"); });
    } catch (const Error& e) {
      fail(e.what(), e.code());
    }
    heapWorkspace_.reset();  // the smaller buffer first
    heapWorkspaceBytes_ = 0;
    void* p = allocateAligned(bytes);
    if (!p)
      fail("out of memory allocating " + std::to_string(bytes) + " bytes of kernel workspace");
    heapWorkspace_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    heapWorkspaceBytes_ = bytes;
  }
  return heapWorkspace_.get();
}

}  // namespace kiln::cpu
