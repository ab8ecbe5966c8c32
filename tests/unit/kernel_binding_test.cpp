// Kernels are bound when they are made: they read their node's attributes then (a bad value fails
// at creation, naming the node), keep them, and never look at the node while running.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// A KernelContext offers no way to reach its node's attributes.
template <typename Context>
constexpr bool kHasNodeAccessor = requires(const Context& ctx) {
  ctx.node();
};
static_assert(!kHasNodeAccessor<cpu::KernelContext>);

ir::Node makeNode(std::string name, std::string opType, int64_t opset,
                  ir::AttributeMap attrs = {}) {
  ir::Node node;
  node.name = std::move(name);
  node.opType = std::move(opType);
  node.opset = opset;
  node.attrs = std::move(attrs);
  return node;
}

cpu::Kernel makeKernel(const ir::Node& node, const std::vector<const ir::TypeInfo*>& inputTypes) {
  cpu::KernelCreateInfo info{node, inputTypes,
                             std::vector<const Tensor*>(inputTypes.size(), nullptr)};
  return cpu::KernelRegistry::create(info, cpu::KernelRegistry::global().select(info));
}

std::string creationError(const ir::Node& node,
                          const std::vector<const ir::TypeInfo*>& inputTypes) {
  try {
    makeKernel(node, inputTypes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const ir::TypeInfo kFloat4{DataType::kFloat32, ir::symShapeOf({4})};
const ir::TypeInfo kInt64One{DataType::kInt64, ir::symShapeOf({1})};

TEST(KernelBinding, BadAttributeValueFailsWhenTheKernelIsMade) {
  EXPECT_THAT(creationError(makeNode("pad1", "Pad", 18, {{"mode", std::string("mirror")}}),
                            {&kFloat4, &kInt64One}),
              HasSubstr("node 'pad1' (Pad): unsupported mode 'mirror'"));
  EXPECT_THAT(
      creationError(makeNode("cast1", "Cast", 24,
                             {{"to", int64_t{1}}, {"round_mode", std::string("sideways")}}),
                    {&kFloat4}),
      HasSubstr(
          "node 'cast1' (Cast): round_mode must be 'up', 'down' or 'nearest', got 'sideways'"));
  EXPECT_THAT(creationError(makeNode("nll1", "NegativeLogLikelihoodLoss", 22,
                                     {{"reduction", std::string("max")}}),
                            {&kFloat4, &kInt64One}),
              HasSubstr("node 'nll1' (NegativeLogLikelihoodLoss): reduction must be none, sum or "
                        "mean, got 'max'"));
  EXPECT_THAT(
      creationError(makeNode("grid1", "GridSample", 20, {{"padding_mode", std::string("wrap")}}),
                    {&kFloat4, &kFloat4}),
      HasSubstr("node 'grid1' (GridSample): unknown padding_mode 'wrap'"));
}

TEST(KernelBinding, MissingRequiredAttributeFailsWhenTheKernelIsMade) {
  EXPECT_THAT(creationError(makeNode("d2s", "DepthToSpace", 13), {&kFloat4}),
              HasSubstr("node 'd2s' (DepthToSpace): required attribute 'blocksize' is missing"));
}

// The kernel made for axis 1 gathers along axis 1 even when the context it runs in belongs to a
// node whose attributes say otherwise: it uses what it read when it was made.
TEST(KernelBinding, RunUsesTheAttributesReadWhenMade) {
  const ir::TypeInfo data{DataType::kFloat32, ir::symShapeOf({2, 3})};
  const ir::TypeInfo indices{DataType::kInt64, ir::symShapeOf({1})};
  const ir::Node made = makeNode("gather1", "Gather", 13, {{"axis", int64_t{1}}});
  const cpu::Kernel kernel = makeKernel(made, {&data, &indices});

  const ir::Node other = makeNode("gather1", "Gather", 13, {{"axis", int64_t{0}}});
  const Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {0, 1, 2, 10, 11, 12});
  const Tensor picks = Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {2});
  std::vector<Tensor> outs(1);
  const std::vector<ir::TypeInfo> outTypes = {
      ir::TypeInfo{DataType::kFloat32, ir::symShapeOf({2, 1})}};
  cpu::KernelContext ctx(other, {&x, &picks}, outs, outTypes);
  kernel.run(ctx);
  ASSERT_EQ(outs[0].shape(), (Shape{2, 1}));
  EXPECT_EQ(outs[0].data<float>()[0], 2.0f);
  EXPECT_EQ(outs[0].data<float>()[1], 12.0f);
}

// Run-time shape checks still name the node, with the messages shape inference uses.
TEST(KernelBinding, RunTimeChecksNameTheNode) {
  const ir::TypeInfo data{DataType::kFloat32, ir::symShapeOf({2, 3})};
  const ir::Node node = makeNode("gather2", "Gather", 13, {{"axis", int64_t{5}}});
  const cpu::Kernel kernel = makeKernel(node, {&data, &kInt64One});
  const Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
  const Tensor picks = Tensor::fromVector<int64_t>(DataType::kInt64, {1}, {0});
  std::vector<Tensor> outs(1);
  const std::vector<ir::TypeInfo> outTypes = {
      ir::TypeInfo{DataType::kFloat32, ir::symShapeOf({2, 1})}};
  cpu::KernelContext ctx(node, {&x, &picks}, outs, outTypes);
  try {
    kernel.run(ctx);
    FAIL() << "an axis out of range ran";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'gather2' (Gather): axis 5 is out of range for rank 2"));
  }
}

}  // namespace
}  // namespace kiln
