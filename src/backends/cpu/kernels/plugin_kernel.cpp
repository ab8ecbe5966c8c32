// The CPU kernel of plugin nodes, found through the kernel registry's fallback for any (domain,
// op type) that names a registered plugin. An engine's kernels are shared by execution contexts
// on many threads, so each concurrent run takes a clone of the plugin from a pool (cloned on
// demand, returned after the run): configure and enqueue never run concurrently on one instance.
#include <mutex>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_registry.h"
#include "plugin/plugin_node.h"

namespace kiln::cpu {

namespace {

struct Instance {
  std::unique_ptr<IPlugin> plugin;
  std::vector<Shape> inputShapes, outputShapes;  // of the last configure
  bool configured = false;
  Tensor workspace;  // 64-byte aligned scratch memory
};

class InstancePool {
 public:
  InstancePool(std::shared_ptr<const IPlugin> prototype, std::vector<Tensor> constants)
      : prototype_(std::move(prototype)),
        constants_(std::move(constants)),
        label_(plugin::pluginLabel(*prototype_)) {}

  void run(KernelContext& ctx) {
    std::unique_ptr<Instance> instance = acquire(ctx);
    try {
      runOn(*instance, ctx);
    } catch (...) {
      release(std::move(instance));
      throw;
    }
    release(std::move(instance));
  }

 private:
  std::unique_ptr<Instance> acquire(KernelContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        auto instance = std::move(free_.back());
        free_.pop_back();
        return instance;
      }
    }
    auto instance = std::make_unique<Instance>();
    try {
      instance->plugin = prototype_->clone();
    } catch (const std::exception& e) {
      ctx.fail(label_ + ": clone() failed: " + e.what());
    }
    if (!instance->plugin) ctx.fail(label_ + ": clone() returned no plugin");
    return instance;
  }

  void release(std::unique_ptr<Instance> instance) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(instance));
  }

  // Runs one plugin call, turning a failed Status or an exception into an error naming the
  // node (ctx.fail adds it) and the plugin.
  template <typename Fn>
  void call(KernelContext& ctx, const char* what, Fn&& fn) {
    Status status;
    try {
      status = fn();
    } catch (const std::exception& e) {
      status = Status(ErrorCode::kRuntimeError, e.what());
    }
    if (!status.ok()) ctx.fail(label_ + " " + what + " failed: " + status.toString());
  }

  void runOn(Instance& instance, KernelContext& ctx) {
    std::vector<PluginTensorDesc> inDescs(ctx.numInputs()), outDescs(ctx.numOutputs());
    std::vector<const Tensor*> inputs(ctx.numInputs(), nullptr);
    std::vector<Tensor*> outputs(ctx.numOutputs(), nullptr);
    std::vector<Shape> inShapes(ctx.numInputs()), outShapes(ctx.numOutputs());
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      if (!ctx.hasInput(i)) {
        inDescs[i].present = false;
        continue;
      }
      inputs[i] = &ctx.input(i);
      inDescs[i] = PluginTensorDesc{
          inputs[i]->dtype(), inputs[i]->shape(),
          i < constants_.size() && constants_[i].defined() ? &constants_[i] : nullptr, true};
      inShapes[i] = inputs[i]->shape();
    }
    for (size_t k = 0; k < ctx.numOutputs(); ++k) {
      outputs[k] = &ctx.output(k);
      outDescs[k] = PluginTensorDesc{outputs[k]->dtype(), outputs[k]->shape(), nullptr, true};
      outShapes[k] = outputs[k]->shape();
    }
    if (!instance.configured || inShapes != instance.inputShapes ||
        outShapes != instance.outputShapes) {
      call(ctx, "configure", [&] { return instance.plugin->configure(inDescs, outDescs); });
      size_t bytes = 0;
      call(ctx, "getWorkspaceSize", [&] {
        bytes = instance.plugin->getWorkspaceSize(inDescs, outDescs);
        return Status();
      });
      if (bytes > static_cast<size_t>(instance.workspace.numel())) {
        instance.workspace = Tensor(DataType::kUint8, {static_cast<int64_t>(bytes)});
      }
      instance.inputShapes = std::move(inShapes);
      instance.outputShapes = std::move(outShapes);
      instance.configured = true;
    }
    void* workspace = instance.workspace.numel() ? instance.workspace.raw() : nullptr;
    call(ctx, "enqueue", [&] { return instance.plugin->enqueue(inputs, outputs, workspace); });
  }

  std::shared_ptr<const IPlugin> prototype_;
  std::vector<Tensor> constants_;
  std::string label_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Instance>> free_;
};

const char* positionName(int pos, int nbInputs) { return pos < nbInputs ? "input" : "output"; }

// Checks the plugin's supported formats for the node's types and returns a kernel that runs the
// plugin: each concurrent run takes its own clone (configure on new shapes, workspace, enqueue).
KernelFn makePluginKernel(const KernelCreateInfo& info) {
  const ir::Node& node = info.node;
  if (!node.plugin) {
    std::string missing = plugin::describeMissingPlugin(node);
    ir::failNode(node, missing.empty() ? "the plugin node has no plugin" : missing,
                 ErrorCode::kUnsupportedNode);
  }
  const IPlugin& plugin = *node.plugin;
  const int nbInputs = static_cast<int>(info.inputTypes.size());
  std::vector<DataType> inputTypes;
  std::vector<PluginTensorFormat> inOut;
  for (const ir::TypeInfo* t : info.inputTypes) {
    inputTypes.push_back(t ? t->dtype : DataType::kUndefined);
    inOut.push_back(PluginTensorFormat{inputTypes.back(), TensorFormat::kLINEAR});
  }
  for (int k = 0; k < plugin.getNbOutputs(); ++k)
    inOut.push_back(
        PluginTensorFormat{plugin.getOutputDataType(k, inputTypes), TensorFormat::kLINEAR});
  for (int pos = 0; pos < static_cast<int>(inOut.size()); ++pos) {
    if (pos < nbInputs && !info.inputTypes[static_cast<size_t>(pos)])
      continue;  // omitted optional input
    if (!plugin.supportsFormatCombination(pos, inOut, nbInputs)) {
      int index = pos < nbInputs ? pos : pos - nbInputs;
      ir::failNode(node,
                   plugin::pluginLabel(plugin) + " does not support " +
                       positionName(pos, nbInputs) + " " + std::to_string(index) + " of type " +
                       dataTypeName(inOut[static_cast<size_t>(pos)].type) + " (linear layout)",
                   ErrorCode::kUnsupportedNode);
    }
  }
  std::vector<Tensor> constants;
  for (const Tensor* c : info.constants) constants.push_back(c ? *c : Tensor());
  auto pool = std::make_shared<InstancePool>(node.plugin, std::move(constants));
  return [pool](KernelContext& ctx) { pool->run(ctx); };
}

struct InstallPluginKernelFallback {
  InstallPluginKernelFallback() {
    static const KernelFactory factory = makePluginKernel;
    KernelRegistry::global().setFallback([](const std::string& domain, const std::string& opType) {
      return PluginRegistry::global().hasPlugin(opType, domain) ? &factory : nullptr;
    });
  }
};

const InstallPluginKernelFallback installPluginKernelFallback;

}  // namespace

}  // namespace kiln::cpu
