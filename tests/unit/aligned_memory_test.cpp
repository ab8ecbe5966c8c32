// allocateAligned / allocateSharedFloats / ScratchFloats (core/aligned_memory.h): the alignment
// each size gets, zero-filling, growth, and the huge-page advice on large buffers.
#include "core/aligned_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(AlignedMemory, SmallBuffersOnCacheLinesLargeOnes2MiB) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, size_t{64} << 10, kHugePageBytes - 4}) {
    void* p = allocateAligned(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
    std::free(p);
  }
  for (size_t bytes : {kHugePageBytes, kHugePageBytes + 4, size_t{7} << 20}) {
    void* p = allocateAligned(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(address(p) % kHugePageBytes, 0u) << bytes;
    std::free(p);
  }
}

// A size near SIZE_MAX cannot be rounded up to a cache line (it used to wrap to a tiny buffer).
TEST(AlignedMemory, SizeThatCannotBeRoundedUpIsRefused) {
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 63, SIZE_MAX - kHugePageBytes + 1}) {
    void* p = allocateAligned(bytes);
    EXPECT_EQ(p, nullptr) << bytes;
    std::free(p);
  }
}

TEST(AlignedMemory, SharedFloatsAreZeroed) {
  const int64_t count = (int64_t{3} << 20) / 4 + 5;  // past 2 MiB: the huge-page path
  std::shared_ptr<float> floats = allocateSharedFloats(count);
  for (int64_t i = 0; i < count; i += 4099) EXPECT_EQ(floats.get()[i], 0.0f) << i;
  EXPECT_EQ(floats.get()[count - 1], 0.0f);
  EXPECT_EQ(allocateSharedFloats(0).get() != nullptr, true);
}

TEST(AlignedMemory, ScratchGrowsAndKeepsItsBufferWhenLargeEnough) {
  ScratchFloats scratch;
  float* small = scratch.get(10);
  EXPECT_EQ(address(small) % 64, 0u);
  small[9] = 1.0f;
  EXPECT_EQ(scratch.get(8), small);  // no smaller request reallocates
  float* large = scratch.get(int64_t{1} << 20);
  EXPECT_EQ(address(large) % kHugePageBytes, 0u);
  large[(int64_t{1} << 20) - 1] = 2.0f;
  EXPECT_EQ(scratch.get(16), large);
}

// The flags of the mapping holding `p`, from /proc/self/smaps ("" if not found).
std::string vmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = address(p) >= begin && address(p) < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(AlignedMemory, LargeBuffersAreAdvisedForHugePages) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "no transparent huge pages in this kernel";
  }
  void* p = allocateAligned(size_t{4} << 20);
  ASSERT_NE(p, nullptr);
  const std::string flags = vmFlagsOf(p);
  std::free(p);
  ASSERT_FALSE(flags.empty()) << "no /proc/self/smaps entry for the buffer";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

}  // namespace
}  // namespace kiln
