// The default allocation limit (core/tensor_limits.h): with no limit set, a shape whose tensors
// need more than 90 % of this machine's memory is refused naming the node, its output (by name, or
// by index where the kernel allocates it), the shape, the bytes and the limit; a limit set above
// the default raises it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/tensor_limits.h"
#include "kiln/error.h"
#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using namespace kiln::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kRows = 65536;  // x [65536, 1]: 256 KiB, allocated by the caller

// Columns of w [1, K] that make h = x w need more than this machine's physical memory.
int64_t columnsOverMemory() {
  return static_cast<int64_t>(physicalMemoryBytes() / (4 * kRows)) + 1;
}

// x [N, 1] (N dynamic) -> MatMul 'mm' w [1, K] -> h [N, K] -> Relu -> y.
std::string wideMatMulModel(int64_t columns) {
  auto m = makeModel();
  addInput(m, "x", {-1, 1});
  addFloatInitializer(m, "w", {1, columns}, std::vector<float>(static_cast<size_t>(columns), 0.5f));
  addNode(m, "MatMul", {"x", "w"}, {"h"}, "mm");
  addNode(m, "Relu", {"h"}, {"y"}, "relu");
  addOutput(m, "y", {-1, columns});
  return m.SerializeAsString();
}

std::string refusal(Session& session) {
  Tensor x(DataType::kFloat32, {kRows, 1});
  try {
    session.run({{"x", x}});
  } catch (const Error& e) {
    return e.what();
  }
  return "the run succeeded";
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

TEST(DefaultAllocationLimit, IsNinetyPercentOfPhysicalMemoryWhereNoScopeSetsOne) {
  EXPECT_EQ(defaultAllocationLimitBytes(), physicalMemoryBytes() / 10 * 9);
  EXPECT_EQ(allocationLimitBytes(), defaultAllocationLimitBytes());
  EXPECT_THROW(checkAllocation(defaultAllocationLimitBytes() + 1, [] { return "b"; }), Error);
}

TEST(DefaultAllocationLimit, ALimitAboveTheDefaultRaisesIt) {
  const uint64_t raised = physicalMemoryBytes() * 2;
  AllocationLimitScope scope(raised);
  EXPECT_EQ(allocationLimitBytes(), raised);
  checkAllocation(defaultAllocationLimitBytes() + 1, [] { return "b"; });  // no longer refused
  try {
    checkAllocation(raised + 1, [] { return std::string("buffer 'b'"); });
    FAIL() << "a buffer over the raised limit was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("buffer 'b' needs " + byteCountText(raised + 1) +
                                    ", over the allocation limit of " + mib(raised)));
  }
}

TEST(DefaultAllocationLimit, ASessionRefusesAShapeOverItNamingNodeOutputBytesAndLimit) {
  const int64_t columns = columnsOverMemory();
  const std::string bytes = wideMatMulModel(columns);
  Session session(bytes.data(), bytes.size(), SessionOptions{});
  const uint64_t need = uint64_t{4} * kRows * static_cast<uint64_t>(columns);
  EXPECT_THAT(
      refusal(session),
      AllOf(HasSubstr("node 'mm' (MatMul): output "),
            HasSubstr("float32[65536x" + std::to_string(columns) + "] needs " + mib(need) +
                      ", over the default allocation limit of " +
                      mib(defaultAllocationLimitBytes()) + " (90 % of this machine's memory)")));
}

TEST(DefaultAllocationLimit, ASessionLimitAboveTheDefaultIsTheOneNamed) {
  const int64_t columns = columnsOverMemory();
  const std::string bytes = wideMatMulModel(columns);
  SessionOptions options;
  options.allocationLimitBytes = defaultAllocationLimitBytes() + (uint64_t{1} << 20);
  Session session(bytes.data(), bytes.size(), options);
  EXPECT_THAT(
      refusal(session),
      AllOf(HasSubstr("node 'mm' (MatMul): output "),
            HasSubstr("float32[65536x" + std::to_string(columns) + "] needs " +
                      mib(uint64_t{4} * kRows * static_cast<uint64_t>(columns)) +
                      ", over the allocation limit of " + mib(options.allocationLimitBytes))));
}

}  // namespace
}  // namespace kiln
