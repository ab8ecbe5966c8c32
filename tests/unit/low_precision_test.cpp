// The low-precision element types (float8, float4, int4, uint4, int2, uint2, e8m0): conversions
// bit for bit against ml_dtypes / onnx.numpy_helper (low_precision_tables.h), packing in ONNX
// files, and Cast / QuantizeLinear / DequantizeLinear models whose expected outputs come from
// onnx.reference.ReferenceEvaluator (the values are listed next to each test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <limits>

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/low_precision.h"
#include "kiln/error.h"
#include "low_precision_tables.h"
#include "onnx/tensor_proto.h"
#include "single_node_model.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace kiln::testing;

float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

/// A tensor of a low-precision type from its stored bytes (bit patterns).
Tensor lowPrecision(DataType type, Shape shape, const std::vector<uint8_t>& codes) {
  return Tensor::fromVector<uint8_t>(type, std::move(shape), codes);
}

Tensor floats(Shape shape, const std::vector<float>& values) {
  return Tensor::fromVector<float>(DataType::kFloat32, std::move(shape), values);
}

// ---- Conversions against the tables ----

TEST(LowPrecisionConversion, EncodesLikeTheOnnxReference) {
  using namespace low_precision_tables;
  for (const EncodeRow& row : kEncodeRows) {
    LowPrecisionOptions options;
    options.saturate = row.saturate;
    options.e8m0Rounding = row.rounding;
    for (size_t i = 0; i < kInputCount; ++i) {
      const float x = floatFromBits(kInputs[i]);
      EXPECT_EQ(floatToLowPrecision(row.type, x, options), row.expected[i])
          << dataTypeName(row.type) << " saturate=" << row.saturate
          << " rounding=" << static_cast<int>(row.rounding) << " x=" << x << " (0x" << std::hex
          << kInputs[i] << ")";
    }
  }
}

TEST(LowPrecisionConversion, DecodesEveryCodeLikeMlDtypes) {
  using namespace low_precision_tables;
  for (const DecodeRow& row : kDecodeRows) {
    for (int code = 0; code < row.codes; ++code) {
      const float got = lowPrecisionToFloat(row.type, static_cast<uint8_t>(code));
      const float expected = floatFromBits(row.expected[code]);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << dataTypeName(row.type) << " code " << code;
      } else {
        EXPECT_EQ(bitsOf(got), row.expected[code])
            << dataTypeName(row.type) << " code " << code << ": " << got << " vs " << expected;
      }
    }
  }
}

TEST(LowPrecisionConversion, EveryFiniteFloat8ValueRoundTrips) {
  // e8m0's code 0 is 2^-127, a float32 subnormal, which round_mode "up" takes to 2^-126.
  LowPrecisionOptions options;
  options.e8m0Rounding = E8M0Rounding::kDown;
  for (DataType type : {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                        DataType::kFloat8E5M2FNUZ, DataType::kFloat8E8M0}) {
    for (int code = 0; code < 256; ++code) {
      const float v = lowPrecisionToFloat(type, static_cast<uint8_t>(code));
      if (std::isnan(v) || std::isinf(v)) continue;
      EXPECT_EQ(floatToLowPrecision(type, v, options), code) << dataTypeName(type) << " " << v;
    }
  }
}

TEST(LowPrecisionConversion, DoubleInputsRoundOnceToNearestEven) {
  // 1 + 2^-4 + 2^-40 is just above the midpoint of 1 and 1.125 in E4M3: a detour through
  // float32 would drop the 2^-40 and round the tie down to 1.
  EXPECT_EQ(floatToLowPrecision(DataType::kFloat8E4M3FN, 1.0 + 0.0625 + std::ldexp(1.0, -40)),
            0x39);
  EXPECT_EQ(floatToLowPrecision(DataType::kFloat8E4M3FN, 1.0625), 0x38);
}

TEST(LowPrecisionConversion, IntegerFormatsWrapLikeIntegerCasts) {
  EXPECT_EQ(integerToLowPrecision(DataType::kUint4, 300), 12);  // 300 = 0x12C
  EXPECT_EQ(integerToLowPrecision(DataType::kInt4, -9), 7);
  EXPECT_EQ(integerToLowPrecision(DataType::kInt2, -2), 2);
  EXPECT_EQ(integerToLowPrecision(DataType::kUint2, 7), 3);
  EXPECT_EQ(lowPrecisionToFloat(DataType::kInt4, 0xF8), -8.0f);  // the high bits are ignored
  EXPECT_EQ(lowPrecisionIntegerRange(DataType::kInt4), (std::pair<int64_t, int64_t>{-8, 7}));
  EXPECT_EQ(lowPrecisionIntegerRange(DataType::kUint2), (std::pair<int64_t, int64_t>{0, 3}));
}

TEST(LowPrecisionConversion, DataTypeTraits) {
  EXPECT_EQ(static_cast<int>(DataType::kFloat8E4M3FN), 17);
  EXPECT_EQ(static_cast<int>(DataType::kInt2), 26);
  EXPECT_EQ(dataTypeName(DataType::kFloat8E8M0), "float8_e8m0fnu");
  EXPECT_EQ(dataTypeName(DataType::kFloat4E2M1), "float4_e2m1fn");
  EXPECT_EQ(dataTypeSize(DataType::kInt4), 1u);
  EXPECT_TRUE(isFloatingPoint(DataType::kFloat8E5M2FNUZ));
  EXPECT_TRUE(isSignedInteger(DataType::kInt2));
  EXPECT_TRUE(isUnsignedInteger(DataType::kUint4));
  EXPECT_TRUE(isLowPrecision(DataType::kFloat8E8M0));
  EXPECT_FALSE(isLowPrecision(DataType::kBFloat16));
  EXPECT_TRUE(isSupportedDataType(DataType::kUint2));
  EXPECT_FALSE(isSupportedDataType(static_cast<DataType>(27)));  // float6 is not supported
  EXPECT_EQ(lowPrecision(DataType::kFloat8E5M2, {2}, {0x3c, 0x7b}).doubleAt(1), 57344.0);
}

// ---- Packing ----

TEST(LowPrecisionPacking, FourBitAndTwoBitValuesPackLowBitsFirst) {
  const std::vector<uint8_t> int4{0x0F, 0x07, 0x08};  // -1, 7, -8
  EXPECT_EQ(packLowPrecision(DataType::kInt4, int4.data(), 3), std::string("\x7F\x08", 2));
  const std::vector<uint8_t> uint2{1, 2, 3, 0, 3};
  EXPECT_EQ(packLowPrecision(DataType::kUint2, uint2.data(), 5), std::string("\x39\x03", 2));
  std::vector<uint8_t> back(5);
  const std::string packed = packLowPrecision(DataType::kUint2, uint2.data(), 5);
  unpackLowPrecision(DataType::kUint2, reinterpret_cast<const uint8_t*>(packed.data()), 5,
                     back.data());
  EXPECT_EQ(back, uint2);
  EXPECT_EQ(packedByteCount(DataType::kFloat4E2M1, 5), 3u);
  EXPECT_EQ(packedByteCount(DataType::kFloat8E4M3FN, 5), 5u);
  // Element counts near INT64_MAX (a value_pb fuzz finding: numel + 1 overflowed).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(packedByteCount(DataType::kInt4, kMax), static_cast<size_t>(kMax / 2 + 1));
  EXPECT_EQ(packedByteCount(DataType::kUint2, kMax), static_cast<size_t>(kMax / 4 + 1));
}

TEST(LowPrecisionPacking, LoaderUnpacksRawDataAndInt32Data) {
  onnx::TensorProto raw;
  raw.set_data_type(static_cast<int>(DataType::kInt4));  // Debian's onnx.proto predates INT4
  raw.add_dims(3);
  raw.set_raw_data(std::string("\x7F\x08", 2));
  Tensor t = onnx_import::tensorFromProto(raw, "", "initializer 'w'");
  ASSERT_EQ(t.dtype(), DataType::kInt4);
  EXPECT_THAT(valuesOf<uint8_t>(t), ElementsAre(0x0F, 0x07, 0x08));

  onnx::TensorProto typed;  // int32_data holds packed bytes, one per entry
  typed.set_data_type(static_cast<int>(DataType::kUint2));
  typed.add_dims(5);
  typed.add_int32_data(0x39);
  typed.add_int32_data(0x03);
  EXPECT_THAT(valuesOf<uint8_t>(onnx_import::tensorFromProto(typed, "", "w")),
              ElementsAre(1, 2, 3, 0, 3));

  onnx::TensorProto float8;  // int32_data holds one float8 bit pattern per entry
  float8.set_data_type(static_cast<int>(DataType::kFloat8E4M3FN));
  float8.add_dims(2);
  float8.add_int32_data(0x38);
  float8.add_int32_data(0xFE);
  Tensor f = onnx_import::tensorFromProto(float8, "", "w");
  EXPECT_EQ(f.doubleAt(0), 1.0);
  EXPECT_EQ(f.doubleAt(1), -448.0);
}

TEST(LowPrecisionPacking, LoaderRejectsAWrongPackedSize) {
  onnx::TensorProto raw;
  raw.set_data_type(static_cast<int>(DataType::kFloat4E2M1));
  raw.add_dims(3);
  raw.set_raw_data(std::string("\x01\x02\x03", 3));
  try {
    onnx_import::tensorFromProto(raw, "", "initializer 'w'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("initializer 'w'"));
    EXPECT_THAT(e.what(), HasSubstr("raw_data has 3 bytes but shape 3 of float4_e2m1fn needs 2"));
  }
}

TEST(LowPrecisionPacking, WriterPacksAndTheLoaderReadsItBack) {
  const Tensor t = lowPrecision(DataType::kInt2, {5}, {1, 2, 3, 0, 3});
  onnx::TensorProto proto;
  onnx_import::tensorToProto(t, "x", proto);
  EXPECT_EQ(proto.raw_data(), std::string("\x39\x03", 2));
  EXPECT_THAT(valuesOf<uint8_t>(onnx_import::tensorFromProto(proto, "", "x")),
              ElementsAre(1, 2, 3, 0, 3));
}

// ---- Cast ----

TEST(LowPrecisionCast, FloatToFloat8FollowsSaturate) {
  const Tensor x = floats({6}, {0.3f, 470.0f, -1e6f, INFINITY, NAN, 0x1p-10f});
  auto saturating = SingleNodeModel("Cast", 19)
                        .attr("to", int64_t{17})
                        .input("x", x)
                        .output("y", DataType::kFloat8E4M3FN)
                        .run();
  EXPECT_THAT(valuesOf<uint8_t>(saturating[0].second), ElementsAre(42, 126, 254, 126, 127, 0));
  auto plain = SingleNodeModel("Cast", 19)
                   .attr("to", int64_t{17})
                   .attr("saturate", int64_t{0})
                   .input("x", x)
                   .output("y", DataType::kFloat8E4M3FN)
                   .run();
  EXPECT_THAT(valuesOf<uint8_t>(plain[0].second), ElementsAre(42, 127, 255, 127, 127, 0));
}

TEST(LowPrecisionCast, Float8E5M2ToFloat16) {
  const Tensor x =
      lowPrecision(DataType::kFloat8E5M2, {7}, {0x3c, 0x7b, 0x7c, 0xfc, 0x7e, 0x01, 0x83});
  auto y = SingleNodeModel("Cast", 19)
               .attr("to", int64_t{10})
               .input("x", x)
               .output("y", DataType::kFloat16)
               .run();
  std::vector<uint16_t> bits;
  for (const Half& h : valuesOf<Half>(y[0].second)) bits.push_back(h.bits);
  EXPECT_THAT(bits, ElementsAre(15360, 31488, 31744, 64512, 32256, 256, 33536));
}

TEST(LowPrecisionCast, Int4ToInt8AndFloatToUint4) {
  auto widened = SingleNodeModel("Cast", 21)
                     .attr("to", int64_t{3})
                     .input("x", lowPrecision(DataType::kInt4, {4}, {0x0F, 0x08, 0x07, 0x03}))
                     .output("y", DataType::kInt8)
                     .run();
  EXPECT_THAT(valuesOf<int8_t>(widened[0].second), ElementsAre(-1, -8, 7, 3));
  // Truncated toward zero, then wrapped to 4 bits (the reference's astype).
  auto narrowed = SingleNodeModel("Cast", 21)
                      .attr("to", int64_t{21})
                      .input("x", floats({4}, {-1.5f, 16.7f, 3.9f, -9.0f}))
                      .output("y", DataType::kUint4)
                      .run();
  EXPECT_THAT(valuesOf<uint8_t>(narrowed[0].second), ElementsAre(15, 0, 3, 7));
}

TEST(LowPrecisionCast, FloatToE8M0WithRoundMode) {
  const Tensor x = floats({6}, {0.0f, 1.4f, 1.5f, 3e38f, 0.75f, 3.0f});
  auto nearest = SingleNodeModel("Cast", 24)
                     .attr("to", int64_t{24})
                     .attr("saturate", int64_t{0})
                     .attr("round_mode", "nearest")
                     .input("x", x)
                     .output("y", DataType::kFloat8E8M0)
                     .run();
  EXPECT_THAT(valuesOf<uint8_t>(nearest[0].second), ElementsAre(0, 127, 128, 255, 127, 129));
  auto down = SingleNodeModel("Cast", 24)
                  .attr("to", int64_t{24})
                  .attr("round_mode", "down")
                  .input("x", x)
                  .output("y", DataType::kFloat8E8M0)
                  .run();
  EXPECT_THAT(valuesOf<uint8_t>(down[0].second), ElementsAre(0, 127, 127, 254, 126, 128));
}

TEST(LowPrecisionCast, CastLikeTakesTheTargetFromItsSecondInput) {
  auto y = SingleNodeModel("CastLike", 21)
               .input("x", floats({3}, {0.5f, -2.6f, 100.0f}))
               .input("like", lowPrecision(DataType::kFloat4E2M1, {0}, {}))
               .output("y", DataType::kFloat4E2M1)
               .run();
  EXPECT_THAT(valuesOf<uint8_t>(y[0].second), ElementsAre(1, 13, 7));  // 0.5, -3, 6 (saturated)
}

TEST(LowPrecisionCast, StringsAreRefused) {
  try {
    SingleNodeModel("Cast", 19)
        .attr("to", int64_t{8})
        .input("x", lowPrecision(DataType::kFloat8E5M2, {1}, {0x3c}))
        .output("y", DataType::kString)
        .run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot cast float8_e5m2 to string"));
  }
}

// ---- Ops that only move elements (where ONNX's type constraints allow these types) ----

TEST(LowPrecisionMovement, TransposeAndReshapeMoveTheBytes) {
  const Tensor int4 = lowPrecision(DataType::kInt4, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto t = SingleNodeModel("Transpose", 21).input("x", int4).output("y", DataType::kInt4).run();
  EXPECT_EQ(t[0].second.shape(), (Shape{3, 2}));
  EXPECT_THAT(valuesOf<uint8_t>(t[0].second), ElementsAre(1, 4, 2, 5, 3, 6));
  auto r = SingleNodeModel("Reshape", 21)
               .input("x", lowPrecision(DataType::kFloat8E5M2, {3}, {0x3c, 0x7b, 0x01}))
               .input("shape", Tensor::fromVector<int64_t>(DataType::kInt64, {2}, {1, 3}))
               .output("y", DataType::kFloat8E5M2)
               .run();
  EXPECT_EQ(r[0].second.shape(), (Shape{1, 3}));
  EXPECT_THAT(valuesOf<uint8_t>(r[0].second), ElementsAre(0x3c, 0x7b, 0x01));
}

// ---- QuantizeLinear / DequantizeLinear ----

TEST(LowPrecisionQuantize, Int4PerAxisRoundsAndClamps) {
  auto y = SingleNodeModel("QuantizeLinear", 21)
               .attr("axis", int64_t{0})
               .input("x", floats({2, 3}, {-3.4f, 0.5f, 1.5f, 2.5f, 9.0f, -20.0f}))
               .input("scale", floats({2}, {0.5f, 2.0f}))
               .input("zero_point", lowPrecision(DataType::kInt4, {2}, {0x01, 0x0E}))  // 1, -2
               .output("y", DataType::kInt4)
               .run();
  // -6.8 -> -7 + 1 = -6 (0xA); 2; 4 | 1.25 -> 1 - 2 = -1 (0xF); 2; -12 clamps to -8 (0x8).
  EXPECT_THAT(valuesOf<uint8_t>(y[0].second), ElementsAre(10, 2, 4, 15, 2, 8));
}

TEST(LowPrecisionQuantize, Float8FollowsSaturate) {
  const Tensor x = floats({5}, {0.3f, 100.0f, -1000.0f, NAN, 1e-3f});
  const Tensor zero = lowPrecision(DataType::kFloat8E4M3FN, {}, {0});
  auto saturating = SingleNodeModel("QuantizeLinear", 19)
                        .input("x", x)
                        .input("scale", floats({}, {0.5f}))
                        .input("zero_point", zero)
                        .output("y", DataType::kFloat8E4M3FN)
                        .run();
  EXPECT_THAT(valuesOf<uint8_t>(saturating[0].second), ElementsAre(50, 116, 254, 127, 1));
  auto plain = SingleNodeModel("QuantizeLinear", 19)
                   .attr("saturate", int64_t{0})
                   .input("x", x)
                   .input("scale", floats({}, {0.5f}))
                   .input("zero_point", zero)
                   .output("y", DataType::kFloat8E4M3FN)
                   .run();
  EXPECT_THAT(valuesOf<uint8_t>(plain[0].second), ElementsAre(50, 116, 255, 127, 1));
}

TEST(LowPrecisionQuantize, Int2AndFloat4ThroughOutputDtype) {
  auto int2 = SingleNodeModel("QuantizeLinear", 25)
                  .attr("output_dtype", int64_t{26})
                  .input("x", floats({5}, {-1.4f, -0.6f, 0.4f, 7.0f, NAN}))
                  .input("scale", floats({}, {0.5f}))
                  .output("y", DataType::kInt2)
                  .run();
  EXPECT_THAT(valuesOf<uint8_t>(int2[0].second), ElementsAre(2, 3, 1, 1, 2));  // -2, -1, 1, 1, -2
  auto float4 = SingleNodeModel("QuantizeLinear", 23)
                    .attr("output_dtype", int64_t{23})
                    .input("x", floats({4}, {0.3f, -2.6f, 100.0f, 0.74f}))
                    .input("scale", floats({}, {0.5f}))
                    .output("y", DataType::kFloat4E2M1)
                    .run();
  EXPECT_THAT(valuesOf<uint8_t>(float4[0].second), ElementsAre(1, 15, 7, 3));  // 0.5, -6, 6, 1.5
}

TEST(LowPrecisionQuantize, DequantizeBlockedUint2) {
  auto y = SingleNodeModel("DequantizeLinear", 25)
               .attr("axis", int64_t{0})
               .attr("block_size", int64_t{2})
               .input("x", lowPrecision(DataType::kUint2, {4}, {0, 1, 2, 3}))
               .input("scale", floats({2}, {0.5f, 2.0f}))
               .input("zero_point", lowPrecision(DataType::kUint2, {2}, {1, 3}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second), ElementsAre(-0.5f, 0.0f, -2.0f, 0.0f));
}

TEST(LowPrecisionQuantize, DequantizeFloat4) {
  std::vector<uint8_t> codes(16);
  for (int i = 0; i < 16; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  auto y = SingleNodeModel("DequantizeLinear", 23)
               .input("x", lowPrecision(DataType::kFloat4E2M1, {16}, codes))
               .input("scale", floats({}, {0.25f}))
               .output("y")
               .run();
  EXPECT_THAT(valuesOf<float>(y[0].second),
              ElementsAreArray({0.0f, 0.125f, 0.25f, 0.375f, 0.5f, 0.75f, 1.0f, 1.5f, -0.0f,
                                -0.125f, -0.25f, -0.375f, -0.5f, -0.75f, -1.0f, -1.5f}));
}

TEST(LowPrecisionQuantize, OlderOpsetsRefuseNewTypes) {
  try {
    SingleNodeModel("QuantizeLinear", 19)
        .input("x", floats({1}, {1.0f}))
        .input("scale", floats({}, {1.0f}))
        .input("zero_point", lowPrecision(DataType::kInt4, {}, {0}))
        .output("y", DataType::kInt4)
        .run();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("quantizing to int4 is not supported at opset 19"));
  }
}

}  // namespace
}  // namespace kiln
