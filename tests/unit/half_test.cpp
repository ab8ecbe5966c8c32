#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"

namespace kiln {

TEST(Half, RoundTripsExactValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(halfBitsToFloat(floatToHalfBits(f)), f) << f;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalfBits(70000.0f), 0x7c00);  // overflow to +inf
  EXPECT_TRUE(std::isnan(halfBitsToFloat(floatToHalfBits(NAN))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBfloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16BitsToFloat(floatToBfloat16Bits(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(bfloat16BitsToFloat(floatToBfloat16Bits(NAN))));
}

}  // namespace kiln
