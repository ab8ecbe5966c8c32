// An error raised below a kernel (a tensor over the allocation limit, an allocation the system
// refused) reaches the user naming the node that ran it, as the kernel's own errors do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <new>
#include <string>
#include <utility>

#include "engine/executor.h"
#include "ir/op_schema.h"
#include "kiln/error.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

ir::Node reluNode(std::string name) {
  ir::Node node;
  node.name = std::move(name);
  node.opType = "Relu";
  node.opset = 14;
  node.inputs = {0};
  node.outputs = {1};
  return node;
}

// What runNode throws for a Relu node whose kernel is `kernel`, or "no error".
template <typename Kernel>
std::pair<std::string, ErrorCode> errorOf(Kernel kernel) {
  const ir::Node node = reluNode("r");
  const ir::OpSchema* schema = ir::OpSchemaRegistry::global().find("", "Relu", 14);
  const Tensor x = Tensor::fromVector<float>(DataType::kFloat32, {1}, {1.0f});
  try {
    runNode(node, *schema, cpu::KernelFn(kernel), {&x});
  } catch (const Error& e) {
    return {e.what(), e.code()};
  }
  return {"no error", ErrorCode::kSuccess};
}

TEST(KernelErrorNaming, AnUnnamedErrorGetsTheNode) {
  const auto [message, code] = errorOf([](cpu::KernelContext&) {
    throw Error(ErrorCode::kInvalidArgument, "tensor float32[1099511627776] needs 4194304 MiB");
  });
  EXPECT_EQ(message, "node 'r' (Relu): tensor float32[1099511627776] needs 4194304 MiB");
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
}

TEST(KernelErrorNaming, ARefusedAllocationNamesTheNode) {
  const auto [message, code] = errorOf([](cpu::KernelContext&) { throw std::bad_alloc(); });
  EXPECT_THAT(message, StartsWith("node 'r' (Relu): out of memory"));
  EXPECT_EQ(code, ErrorCode::kOutOfMemory);
}

TEST(KernelErrorNaming, AnErrorNamingANodeIsKept) {
  const auto [message, code] = errorOf([](cpu::KernelContext& ctx) { ctx.fail("bad input"); });
  EXPECT_EQ(message, "node 'r' (Relu): bad input");
}

TEST(KernelErrorNaming, ATerminatedRunIsKept) {
  const auto [message, code] = errorOf([](cpu::KernelContext&) {
    throw Error(ErrorCode::kRuntimeError, "run terminated (RunOptions.terminate was set)");
  });
  EXPECT_THAT(message, StartsWith("run terminated"));
}

}  // namespace
}  // namespace kiln
