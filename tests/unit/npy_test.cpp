// The .npy reader: numpy's own files round-trip, and headers numpy refuses are refused with the
// file and the problem named (issue 22: minus signs and non-digits in the shape were dropped).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/npy_header.h"
#include "kiln/error.h"
#include "kiln/npy.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string errorOf(const std::string& header) {
  try {
    parseNpyHeader(header, "x.npy");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(NpyHeader, ReadsWhatNumpyWrites) {
  NpyHeader h = parseNpyHeader(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", "x.npy");
  EXPECT_EQ(h.descr, "<f4");
  EXPECT_FALSE(h.fortranOrder);
  EXPECT_EQ(h.shape, (Shape{2, 3}));
  EXPECT_EQ(
      parseNpyHeader("{'descr': '|b1', 'fortran_order': True, 'shape': (5,), }\n", "x.npy").shape,
      (Shape{5}));
  EXPECT_EQ(
      parseNpyHeader("{'shape': (), 'descr': \"<i8\", 'fortran_order': False}", "x.npy").shape,
      Shape{});
}

TEST(NpyHeader, RefusesWhatNumpyRefuses) {
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }"),
              HasSubstr("x.npy: malformed .npy header at character 51: a dimension must be a "
                        "non-negative integer"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5, 3), }"),
              HasSubstr("expected ','"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }"),
              HasSubstr("expected ','"));
  EXPECT_THAT(
      errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
      HasSubstr("does not fit in int64"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False}"),
              HasSubstr("the key 'shape' is missing"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'shape': (1,)}"),
              HasSubstr("the key 'fortran_order' is missing"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}"),
              HasSubstr("the key 'descr' appears twice"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}"),
              HasSubstr("unexpected key 'extra'"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': maybe, 'shape': (1,)}"),
              HasSubstr("expected True or False"));
  EXPECT_THAT(errorOf("'descr': '<f4'"), HasSubstr("expected '{'"));
  EXPECT_THAT(errorOf("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}"),
              HasSubstr("at character 17: expected '}'"));
  EXPECT_THAT(errorOf("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk"),
              HasSubstr("unexpected text after the closing '}'"));
}

// A version-1 .npy file with the given header text and payload bytes.
std::string writeRawNpy(const std::string& name, std::string header, size_t payloadBytes) {
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  const std::string path = ::testing::TempDir() + name;
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out << header << std::string(payloadBytes, '\0');
  return path;
}

TEST(NpyReader, RefusesANegativeDimInsteadOfDroppingItsSign) {
  const std::string path =
      writeRawNpy("neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", 24);
  try {
    readNpy(path);
    FAIL() << "a negative dim was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ": malformed .npy header"));
  }
  std::remove(path.c_str());
}

TEST(NpyReader, RefusesAShapeWhoseByteCountOverflows) {
  const std::string path = writeRawNpy(
      "huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
      16);
  try {
    readNpy(path);
    FAIL() << "an overflowing shape was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("shape 4294967296x4294967296 of <f4 is too large"));
  }
  std::remove(path.c_str());
}

TEST(NpyReader, RoundTripsAWrittenTensor) {
  const std::string path = ::testing::TempDir() + "roundtrip.npy";
  Tensor t = Tensor::fromVector<float>(DataType::kFloat32, {2, 3}, {1, -2, 3, -4, 5, -6});
  writeNpy(path, t);
  Tensor back = readNpy(path);
  ASSERT_EQ(back.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back.data<float>()[i], t.data<float>()[i]);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kiln
