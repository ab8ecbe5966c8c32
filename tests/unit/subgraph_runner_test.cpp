// Control-flow kernels run their bodies through the SubgraphRunnerFactory of their creation info
// (backends/cpu/subgraph_runner.h), not through the engine.
#include <gtest/gtest.h>

#include <memory>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/subgraph_runner.h"

namespace kiln {
namespace {

// A body that "runs" by returning one fixed tensor.
class FixedRunner final : public cpu::SubgraphRunner {
 public:
  FixedRunner(std::shared_ptr<const ir::Graph> graph, Tensor value)
      : graph_(std::move(graph)), value_(std::move(value)) {}
  const ir::Graph& graph() const override { return *graph_; }
  std::vector<Tensor> run(const std::vector<Tensor>&,
                          const std::vector<const Tensor*>&) const override {
    ++runs;
    return {value_};
  }
  mutable int runs = 0;

 private:
  std::shared_ptr<const ir::Graph> graph_;
  Tensor value_;
};

// Records the bodies it is asked for; each body's runner returns [1] if it is named "then", else
// [2].
class RecordingFactory final : public cpu::SubgraphRunnerFactory {
 public:
  std::shared_ptr<const cpu::SubgraphRunner> makeRunner(
      std::shared_ptr<const ir::Graph> body) const override {
    const float value = body->name == "then" ? 1.0f : 2.0f;
    bodies.push_back(body->name);
    auto runner = std::make_shared<FixedRunner>(
        body, Tensor::fromVector<float>(DataType::kFloat32, {1}, {value}));
    runners.push_back(runner);
    return runner;
  }
  mutable std::vector<std::string> bodies;
  mutable std::vector<std::shared_ptr<FixedRunner>> runners;
};

std::shared_ptr<ir::Graph> bodyNamed(const std::string& name) {
  auto g = std::make_shared<ir::Graph>();
  g->name = name;
  g->outputs.push_back(g->addValue(name + "_out", {DataType::kFloat32, ir::symShapeOf(Shape{1})}));
  return g;
}

ir::Node ifNode() {
  ir::Node node;
  node.name = "choose";
  node.opType = "If";
  node.opset = 16;
  node.inputs = {0};
  node.outputs = {1};
  node.attrs["then_branch"] = bodyNamed("then");
  node.attrs["else_branch"] = bodyNamed("else");
  return node;
}

float runIf(const cpu::KernelFn& kernel, const ir::Node& node, bool condition) {
  const Tensor cond =
      Tensor::fromVector<uint8_t>(DataType::kBool, {}, {static_cast<uint8_t>(condition)});
  std::vector<Tensor> outputs(1);
  const std::vector<ir::TypeInfo> types(1);
  cpu::KernelContext ctx(node, {&cond}, outputs, types);
  kernel(ctx);
  return outputs[0].data<float>()[0];
}

TEST(SubgraphRunner, IfMakesItsBranchRunnersWithTheFactoryItIsGiven) {
  const ir::Node node = ifNode();
  const ir::TypeInfo condType{DataType::kBool, ir::symShapeOf(Shape{})};
  RecordingFactory factory;
  cpu::KernelCreateInfo info{node, {&condType}, {nullptr}, {}, &factory};
  const cpu::KernelFactory* make = cpu::KernelRegistry::global().find("", "If");
  ASSERT_NE(make, nullptr);
  const cpu::KernelFn kernel = (*make)(info);
  EXPECT_EQ(factory.bodies, (std::vector<std::string>{"then", "else"}));  // once each, at creation
  EXPECT_EQ(runIf(kernel, node, true), 1.0f);
  EXPECT_EQ(runIf(kernel, node, false), 2.0f);
  EXPECT_EQ(runIf(kernel, node, true), 1.0f);
  EXPECT_EQ(factory.bodies.size(), 2u);  // running makes no runner
  EXPECT_EQ(factory.runners[0]->runs, 2);
  EXPECT_EQ(factory.runners[1]->runs, 1);
}

TEST(SubgraphRunner, AControlFlowKernelWithoutAFactoryFailsNamingTheNode) {
  const ir::Node node = ifNode();
  const ir::TypeInfo condType{DataType::kBool, ir::symShapeOf(Shape{})};
  cpu::KernelCreateInfo info{node, {&condType}, {nullptr}, {}, nullptr};
  try {
    (*cpu::KernelRegistry::global().find("", "If"))(info);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'choose' (If)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(
                  "'then_branch' body: the kernel was created without a subgraph runner factory"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
