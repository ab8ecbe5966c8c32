// Little-endian byte encoding for plan files: a growing writer and a bounds-checked reader whose
// every failure is a kiln::Error (kInvalidPlan), never a read past the end.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/internal_api.h"
#include "kiln/error.h"

namespace kiln::plan {

/// CRC-32C (Castagnoli), continuing from crc (0 to start).
KILN_INTERNAL_API uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

class ByteWriter {
 public:
  std::vector<uint8_t>& bytes() { return bytes_; }
  size_t size() const { return bytes_.size(); }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  template <typename T>
  void put(T v) {
    static_assert(std::is_arithmetic_v<T>);
    raw(&v, sizeof(T));
  }
  void u8(uint8_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void i32(int32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void i64(int64_t v) { put(v); }
  void f32(float v) { put(v); }
  void f64(double v) { put(v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void i64s(const std::vector<int64_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  void alignTo(size_t alignment) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, 0);
  }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  /// Reads [begin, end) of data; `section` names the part of the plan in errors.
  ByteReader(const uint8_t* data, size_t begin, size_t end, std::string section)
      : data_(data), pos_(begin), end_(end), section_(std::move(section)) {}

  size_t position() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  bool atEnd() const { return pos_ == end_; }

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint8_t u8(const char* what) { return get<uint8_t>(what); }
  uint32_t u32(const char* what) { return get<uint32_t>(what); }
  int32_t i32(const char* what) { return get<int32_t>(what); }
  uint64_t u64(const char* what) { return get<uint64_t>(what); }
  int64_t i64(const char* what) { return get<int64_t>(what); }
  float f32(const char* what) { return get<float>(what); }
  double f64(const char* what) { return get<double>(what); }
  std::string str(const char* what) {
    uint32_t n = u32(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  /// A count of items each at least minItemBytes long; fails if they cannot fit in what is left.
  uint32_t count(const char* what, size_t minItemBytes) {
    uint32_t n = u32(what);
    if (minItemBytes && n > remaining() / minItemBytes) {
      fail(std::string(what) + " count " + std::to_string(n) + " does not fit in the " +
           std::to_string(remaining()) + " bytes left");
    }
    return n;
  }
  std::vector<int64_t> i64s(const char* what) {
    uint32_t n = count(what, 8);
    std::vector<int64_t> v(n);
    for (auto& x : v) x = i64(what);
    return v;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(ErrorCode::kInvalidPlan, "plan section '" + section_ +
                                             "' is corrupted: " + message + " (at byte offset " +
                                             std::to_string(pos_) + ")");
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > end_ - pos_) {
      fail(std::string("reading ") + what + " needs " + std::to_string(n) + " bytes, only " +
           std::to_string(end_ - pos_) + " left");
    }
  }
  const uint8_t* data_;
  size_t pos_;
  size_t end_;
  std::string section_;
};

}  // namespace kiln::plan
