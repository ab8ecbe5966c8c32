#include "kiln/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/bool_bytes.h"
#include "core/half.h"
#include "core/npy_header.h"
#include "kiln/error.h"

namespace kiln {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, path + ": " + message);
}

DataType dtypeFromDescr(const std::string& descr, const std::string& path, size_t* charsPerString) {
  static const std::pair<const char*, DataType> table[] = {
      {"|b1", DataType::kBool},    {"|i1", DataType::kInt8},    {"<i2", DataType::kInt16},
      {"<i4", DataType::kInt32},   {"<i8", DataType::kInt64},   {"|u1", DataType::kUint8},
      {"<u2", DataType::kUint16},  {"<u4", DataType::kUint32},  {"<u8", DataType::kUint64},
      {"<f2", DataType::kFloat16}, {"<f4", DataType::kFloat32}, {"<f8", DataType::kFloat64},
  };
  for (const auto& [name, type] : table)
    if (descr == name) return type;
  if (descr.size() > 2 && descr.compare(0, 2, "<U") == 0) {
    // At most 9 digits, so that 4 bytes a character times the count cannot overflow.
    const std::string digits = descr.substr(2);
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
      fail(path, "malformed .npy string dtype '" + descr +
                     "' (expected '<U' and a character count below 10^9)");
    }
    *charsPerString = std::stoul(digits);
    // numpy never writes '<U0' (its zero-width strings are '<U1'); taking it would let a few
    // header bytes claim any number of strings, each costing work and memory but no payload.
    if (*charsPerString == 0)
      fail(path, "malformed .npy string dtype '" + descr + "' (a string of 0 characters)");
    return DataType::kString;
  }
  fail(path, "unsupported .npy dtype '" + descr +
                 "' (big-endian, object or structured arrays are not supported)");
}

std::string descrOf(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "|b1";
    case DataType::kInt8:
      return "|i1";
    case DataType::kInt16:
      return "<i2";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt64:
      return "<i8";
    case DataType::kUint8:
      return "|u1";
    case DataType::kUint16:
      return "<u2";
    case DataType::kUint32:
      return "<u4";
    case DataType::kUint64:
      return "<u8";
    case DataType::kFloat16:
      return "<f2";
    case DataType::kFloat32:
      return "<f4";
    case DataType::kFloat64:
      return "<f8";
    default:
      return "";
  }
}

// Encodes one UTF-32 code point as UTF-8.
void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::u32string decodeUtf8(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
    uint32_t cp = extra == 0 ? c : (c & (0x3f >> extra));
    for (int k = 1; k <= extra && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out += static_cast<char32_t>(cp);
    i += 1 + extra;
  }
  return out;
}

}  // namespace

Tensor readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file");
  return readNpy(in, path);
}

Tensor readNpy(std::istream& in, const std::string& path) {
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    fail(path, "not an .npy file (bad magic)");
  int major = static_cast<unsigned char>(magic[6]);
  uint32_t headerLen = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) fail(path, "truncated header");
    headerLen = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) fail(path, "truncated header");
    headerLen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    if (headerLen > (1u << 20)) fail(path, "header is implausibly large");
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major));
  }
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen)) fail(path, "truncated header");

  const NpyHeader parsed = parseNpyHeader(header, path);
  const std::string& descr = parsed.descr;
  if (parsed.fortranOrder)
    fail(path, "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  const Shape& shape = parsed.shape;
  size_t charsPerString = 0;
  DataType dtype = dtypeFromDescr(descr, path, &charsPerString);

  in.seekg(0, std::ios::end);
  uint64_t payload = static_cast<uint64_t>(in.tellg()) - (major == 1 ? 10 : 12) - headerLen;
  in.seekg(static_cast<std::streamoff>((major == 1 ? 10 : 12) + headerLen));
  // The payload must hold shape x element size; checked without overflow before anything is
  // allocated.
  uint64_t needed =
      dtype == DataType::kString ? 4 * static_cast<uint64_t>(charsPerString) : dataTypeSize(dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(needed, static_cast<uint64_t>(d), &needed)) {
      fail(path, "shape " + shapeToString(shape) + " of " + descr + " is too large");
    }
  }
  if (payload < needed) {
    fail(path, "the file holds " + std::to_string(payload) + " bytes of data but shape " +
                   shapeToString(shape) + " of " + descr + " needs " + std::to_string(needed));
  }
  const int64_t numel = shapeNumel(shape);
  if (dtype == DataType::kBool) {  // any byte, read as 0 or 1
    std::vector<uint8_t> bytes(static_cast<size_t>(numel));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(numel));
    return boolsFromBytes(shape, bytes.data());
  }
  Tensor t(dtype, shape);
  if (dtype != DataType::kString) {
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.byteSize()));
    return t;
  }
  if (numel == 0) return t;
  std::vector<char32_t> chars(charsPerString);  // numel strings of this many fit in the payload
  for (int64_t i = 0; i < numel; ++i) {
    in.read(reinterpret_cast<char*>(chars.data()),
            static_cast<std::streamsize>(4 * charsPerString));
    std::string& s = t.data<std::string>()[i];
    for (char32_t c : chars) {
      if (c == 0) break;
      appendUtf8(s, c);
    }
  }
  return t;
}

void writeNpy(const std::string& path, const Tensor& tensor) {
  Tensor t = tensor;
  if (t.dtype() == DataType::kBFloat16) {
    Tensor f(DataType::kFloat32, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = t.data<BFloat16>()[i];
    t = f;
  }
  std::vector<std::u32string> strings;
  size_t maxChars = 1;
  std::string descr = descrOf(t.dtype());
  if (t.dtype() == DataType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      strings.push_back(decodeUtf8(t.data<std::string>()[i]));
      maxChars = std::max(maxChars, strings.back().size());
    }
    descr = "<U" + std::to_string(maxChars);
  }
  if (descr.empty())
    throw Error(ErrorCode::kInvalidArgument, path + ": cannot write " + t.describe() + " as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += (i ? ", " : "") + std::to_string(t.dim(i));
  shape += t.rank() == 1 ? ",)" : ")";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(ErrorCode::kIoError, path + ": cannot create the file");
  out.write("\x93NUMPY\x01\x00", 8);
  char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (t.dtype() == DataType::kString) {
    for (const auto& s : strings) {
      std::u32string padded = s;
      padded.resize(maxChars, U'\0');
      out.write(reinterpret_cast<const char*>(padded.data()),
                static_cast<std::streamsize>(4 * maxChars));
    }
  } else {
    out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.byteSize()));
  }
  if (!out) throw Error(ErrorCode::kIoError, path + ": write failed");
}

}  // namespace kiln
