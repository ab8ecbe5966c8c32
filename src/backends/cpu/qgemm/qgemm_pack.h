// Packing of 8-bit operands into the micro-kernels' strips (qgemm_kernels.h), and their sums
// over K for the zero-point terms. Internal to the qgemm folder.
#pragma once
#include <cstdint>

#include "backends/cpu/qgemm/qgemm.h"

namespace kiln::cpu {

inline int64_t qStrips(int64_t outer, int64_t width) { return (outer + width - 1) / width; }
/// Bytes of one strip of `width` lanes over K.
inline int64_t qStripBytes(int64_t K, int64_t width) { return ((K + 3) / 4) * width * 4; }

/// Packs rows / columns [first, first + count) of v (count <= width * strips) into strips of
/// `width`, each byte stored as value ^ xorMask (0x80 turns s8 into u8 + 128 and back).
void packQStrips(const QMatrixView& v, int64_t first, int64_t count, int64_t K, int64_t width,
                 uint8_t xorMask, uint8_t* dst);

/// sums[i] = sum over k of the stored value (value ^ xorMask, read as u8 when storedUnsigned,
/// else as s8) of row / column first + i, for i < count.
void sumQOuter(const QMatrixView& v, int64_t first, int64_t count, int64_t K, uint8_t xorMask,
               bool storedUnsigned, int32_t* sums);

}  // namespace kiln::cpu
