#include "engine/plan_bytes.h"

#include <nmmintrin.h>

namespace kiln::plan {

// SSE4.2's crc32 instruction computes CRC-32C; every machine with kiln's AVX2 baseline has it.
uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace kiln::plan
