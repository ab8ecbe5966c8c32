#include "core/aligned_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {

void* allocateAligned(size_t bytes) {
  if (bytes > SIZE_MAX - kHugePageBytes) return nullptr;  // rounding up would wrap
  const size_t padded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (padded < kHugePageBytes) return std::aligned_alloc(64, padded);
  // aligned_alloc takes a size that is a multiple of the alignment; the rounded-up tail is never
  // touched, so it costs address space only.
  const size_t chunks = (padded + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, chunks);
  // Only the whole 2 MiB chunks: the tail stays on small pages, so a buffer takes no more
  // resident memory than it uses. Advice, not a requirement: a failure changes nothing.
  if (p) madvise(p, padded / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
  return p;
}

std::shared_ptr<float> allocateSharedFloats(int64_t count) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float);
  float* p = static_cast<float*>(allocateAligned(bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return std::shared_ptr<float>(p, [](float* q) { std::free(q); });
}

ScratchFloats::~ScratchFloats() { std::free(data_); }

void* ScratchFloats::getBytes(uint64_t bytes) {
  if (bytes == 0) return nullptr;
  return get(static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
}

float* ScratchFloats::get(int64_t count) {
  if (count > capacity_) {
    std::free(data_);
    data_ = static_cast<float*>(allocateAligned(static_cast<size_t>(count) * sizeof(float)));
    if (!data_) {
      capacity_ = 0;
      throw std::bad_alloc();
    }
    capacity_ = count;
  }
  return data_;
}

}  // namespace kiln
