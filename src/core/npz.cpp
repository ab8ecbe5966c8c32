// .npz files: a zip archive of .npy files (numpy.savez stores them, numpy.savez_compressed
// deflates them). The central directory at the end of the archive lists every entry with its
// sizes and offset; each entry's data follows its local header. Zip64 archives (entries over
// 4 GiB) are refused.
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/error.h"
#include "kiln/npy.h"

namespace kiln {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument, path + ": " + message);
}

uint32_t le16(const unsigned char* p) { return p[0] | (p[1] << 8); }
uint32_t le32(const unsigned char* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kStored = 0, kDeflated = 8;

struct ZipEntry {
  std::string name;
  uint32_t method = 0;
  uint64_t compressedSize = 0, size = 0, localOffset = 0;
};

std::vector<ZipEntry> readDirectory(const std::string& bytes, const std::string& path) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  // The end-of-directory record is 22 bytes plus a comment of up to 64 KiB.
  size_t end = std::string::npos;
  for (size_t i = bytes.size() >= 22 ? bytes.size() - 22 + 1 : 0;
       i-- > 0 && bytes.size() - i <= 22 + 65535;) {
    if (le32(data + i) == kEndOfDirectory) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) fail(path, "not an .npz file (no zip end-of-directory record)");
  const uint32_t count = le16(data + end + 10);
  uint64_t at = le32(data + end + 16);
  if (count == 0xffff || at == 0xffffffffu) fail(path, "zip64 archives are not supported");
  std::vector<ZipEntry> entries;
  for (uint32_t k = 0; k < count; ++k) {
    if (at + 46 > end || le32(data + at) != kDirectoryEntry)
      fail(path, "damaged zip central directory");
    ZipEntry e;
    e.method = le16(data + at + 10);
    e.compressedSize = le32(data + at + 20);
    e.size = le32(data + at + 24);
    const uint32_t nameLen = le16(data + at + 28), extraLen = le16(data + at + 30),
                   commentLen = le16(data + at + 32);
    e.localOffset = le32(data + at + 42);
    if (at + 46 + nameLen > end) fail(path, "damaged zip central directory");
    e.name.assign(bytes, at + 46, nameLen);
    if (e.size == 0xffffffffu || e.compressedSize == 0xffffffffu)
      fail(path, "entry '" + e.name + "' is zip64, not supported");
    entries.push_back(std::move(e));
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

std::string entryBytes(const std::string& bytes, const ZipEntry& e, const std::string& path) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::string where = path + ": entry '" + e.name + "'";
  if (e.localOffset + 30 > bytes.size() || le32(data + e.localOffset) != kLocalHeader) {
    throw Error(ErrorCode::kInvalidArgument, where + ": damaged local header");
  }
  const uint64_t start =
      e.localOffset + 30 + le16(data + e.localOffset + 26) + le16(data + e.localOffset + 28);
  if (start + e.compressedSize > bytes.size())
    throw Error(ErrorCode::kInvalidArgument, where + ": truncated");
  if (e.method == kStored) return bytes.substr(start, e.size);
  if (e.method != kDeflated) {
    throw Error(ErrorCode::kInvalidArgument, where + ": compression method " +
                                                 std::to_string(e.method) +
                                                 " (only stored and deflated entries are read)");
  }
  // Deflate turns a byte into at most 1032 (zlib's documented limit): a larger claimed size is a
  // damaged or hostile header, refused before its buffer is allocated.
  if (e.size > e.compressedSize * 1032 + 64) {
    throw Error(ErrorCode::kInvalidArgument,
                where + ": claims " + std::to_string(e.size) + " bytes inflated from " +
                    std::to_string(e.compressedSize) + ", more than deflate can produce");
  }
  std::string out(e.size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    throw Error(ErrorCode::kRuntimeError, where + ": zlib failed to start");
  z.next_in = const_cast<Bytef*>(data + start);
  z.avail_in = static_cast<uInt>(e.compressedSize);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const uint64_t produced = z.total_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != e.size)
    throw Error(ErrorCode::kInvalidArgument, where + ": damaged deflate data");
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> readNpz(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file");
  return readNpzBytes(
      std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), path);
}

std::vector<std::pair<std::string, Tensor>> readNpzBytes(const std::string& bytes,
                                                         const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> arrays;
  for (const ZipEntry& e : readDirectory(bytes, path)) {
    std::string name = e.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name.resize(name.size() - 4);
    std::istringstream entry(entryBytes(bytes, e, path));
    arrays.emplace_back(name, readNpy(entry, path + ": entry '" + e.name + "'"));
  }
  return arrays;
}

}  // namespace kiln
