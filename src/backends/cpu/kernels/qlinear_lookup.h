// kiln::QLinearLookup's byte lookups (qlinear_lookup.cpp): y[i] = table[x[i]] for 8-bit x, the
// table's 256 entries indexed by x's bits (x - lowest for int8 is x's bits with the sign flipped;
// the kernel flips the table instead).
#pragma once
#include <cstdint>

namespace kiln::cpu {

/// y[i] = table[x[i]] for i < n, on one thread, with AVX512-VBMI (64 bytes a step).
void lookupBytesAvx512Vbmi(const uint8_t* table, const uint8_t* x, int64_t n, uint8_t* y);

}  // namespace kiln::cpu
