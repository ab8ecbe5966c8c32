// Memory for tensors, the activation arena, packed weights and kernel scratch buffers: aligned to
// a cache line (64 bytes, the widest vector), and from 2 MiB up placed on a 2 MiB boundary with
// its whole 2 MiB chunks advised for transparent huge pages. The kernels walk weights and
// activations of several MiB with large strides; with 4 KiB pages most of those steps miss the
// TLB, and on a virtual machine every miss walks two levels of page tables (ResNet-50 on one
// core: 47-49 ms fastest with huge pages against 51-60 without, docs/performance.md). Systems
// where transparent huge pages are "never" simply ignore the advice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include "core/internal_api.h"

namespace kiln {

/// Buffers from this size up are 2 MiB aligned and advised for huge pages.
constexpr size_t kHugePageBytes = size_t{2} << 20;

/// Bytes rounded up to whole cache lines (64), so that slices of one buffer stay 64-byte aligned.
constexpr uint64_t cacheLineBytes(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

/// `bytes` bytes (at least one cache line), 64-byte aligned, or 2 MiB aligned with huge pages
/// advised from kHugePageBytes up. Free with std::free. nullptr when out of memory.
KILN_INTERNAL_API void* allocateAligned(size_t bytes);

/// `count` floats from allocateAligned, zero-filled, owned by the pointer; throws std::bad_alloc
/// when out of memory. For packed weights, shared by the copies of a kernel.
KILN_INTERNAL_API std::shared_ptr<float> allocateSharedFloats(int64_t count);

/// A float buffer kept by its owner between calls and grown on demand (benches, and products run
/// outside a kernel, which have no planned workspace);
/// its contents are not kept when it grows. Member functions are out of line on purpose: the
/// AVX-512 translation units use it too, and an inline copy compiled with their flags could be
/// the one the linker keeps.
class KILN_INTERNAL_API ScratchFloats {
 public:
  ScratchFloats() = default;
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;
  ~ScratchFloats();
  /// At least `count` floats; throws std::bad_alloc when out of memory.
  float* get(int64_t count);
  /// At least `bytes` bytes (a workspace sized in bytes, e.g. sgemmWorkspaceBytes, for a
  /// product run outside a kernel); null for 0.
  void* getBytes(uint64_t bytes);

 private:
  float* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace kiln
