// The timing cache's store and its file: magic "KILNTCAC", format version (u32), reserved (u32),
// entry count (u64), payload bytes (u64), CRC-32C of the payload (u32), reserved (u32); then per
// entry the key (u32 length + bytes) and the milliseconds (f64), little-endian
// (docs/plan-format.md, "Timing cache").
#include <cpuid.h>

#include <cstring>
#include <map>
#include <mutex>

#include "engine/api_guard.h"
#include "engine/plan_bytes.h"
#include "engine/plan_format.h"
#include "kiln/timing_cache.h"

namespace kiln {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'T', 'C', 'A', 'C'};
constexpr uint32_t kCacheVersion = 1;
constexpr size_t kHeaderBytes = 40;
constexpr uint32_t kLongestKey = 1u << 16;

// The CPU's brand string (CPUID 0x80000002..4), "unknown CPU" where it has none.
std::string cpuModelName() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000004u) return "unknown CPU";
  char brand[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned regs[4];
    __get_cpuid(0x80000002u + leaf, &regs[0], &regs[1], &regs[2], &regs[3]);
    std::memcpy(brand + 16 * leaf, regs, 16);
  }
  std::string name(brand);
  const size_t first = name.find_first_not_of(' '), last = name.find_last_not_of(' ');
  return first == std::string::npos ? "unknown CPU" : name.substr(first, last - first + 1);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

class TimingCache final : public ITimingCache {
 public:
  std::vector<uint8_t> serialize() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint8_t> payload;
    for (const auto& [key, ms] : entries_) {
      put<uint32_t>(payload, static_cast<uint32_t>(key.size()));
      payload.insert(payload.end(), key.begin(), key.end());
      put<double>(payload, ms);
    }
    std::vector<uint8_t> out(kMagic, kMagic + 8);
    put<uint32_t>(out, kCacheVersion);
    put<uint32_t>(out, 0);
    put<uint64_t>(out, entries_.size());
    put<uint64_t>(out, payload.size());
    put<uint32_t>(out, plan::crc32c(payload.data(), payload.size()));
    put<uint32_t>(out, 0);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }
  int64_t combine(const ITimingCache& other) override {
    int64_t added = 0;
    for (const std::string& key : other.keys()) {
      if (query(key)) continue;
      update(key, *other.query(key));
      ++added;
    }
    return added;
  }
  void reset() override {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }
  int64_t size() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(entries_.size());
  }
  int64_t entriesForOtherCpus() const override {
    const std::string mine = timingCacheCpuKey() + ";";
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t n = 0;
    for (const auto& entry : entries_) n += entry.first.compare(0, mine.size(), mine) != 0;
    return n;
  }
  std::optional<double> query(const std::string& key) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  void update(const std::string& key, double milliseconds) override {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[key] = milliseconds;
  }
  std::vector<std::string> keys() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

  /// Reads serialize()'s bytes; throws kInvalidArgument naming `source`.
  void read(const uint8_t* p, size_t size, const std::string& source) {
    const std::string what =
        "timing cache " + (source.empty() ? std::string("(bytes)") : "'" + source + "'");
    auto fail = [&](const std::string& why) {
      throw Error(ErrorCode::kInvalidArgument, what + ": " + why);
    };
    if (size < kHeaderBytes || std::memcmp(p, kMagic, 8) != 0)
      fail("not a kiln timing cache (bad magic or shorter than its header)");
    uint32_t version, crc;
    uint64_t count, payloadBytes;
    std::memcpy(&version, p + 8, 4);
    std::memcpy(&count, p + 16, 8);
    std::memcpy(&payloadBytes, p + 24, 8);
    std::memcpy(&crc, p + 32, 4);
    if (version != kCacheVersion) {
      fail("cache format version " + std::to_string(version) + ", this kiln reads version " +
           std::to_string(kCacheVersion) + "; delete the file and build again to make a new one");
    }
    if (payloadBytes != size - kHeaderBytes) {
      fail("the header gives " + std::to_string(payloadBytes) + " bytes of entries, the file has " +
           std::to_string(size - kHeaderBytes) + " (truncated?)");
    }
    const uint8_t* at = p + kHeaderBytes;
    if (plan::crc32c(at, payloadBytes) != crc) fail("checksum mismatch (the file is damaged)");
    const uint8_t* end = at + payloadBytes;
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t length;
      if (end - at < 4) fail("entry " + std::to_string(i) + " is cut off");
      std::memcpy(&length, at, 4);
      at += 4;
      if (length > kLongestKey || static_cast<uint64_t>(end - at) < length + 8ull)
        fail("entry " + std::to_string(i) + " is cut off");
      std::string key(reinterpret_cast<const char*>(at), length);
      double ms;
      std::memcpy(&ms, at + length, 8);
      at += length + 8;
      if (!(ms >= 0)) fail("entry " + std::to_string(i) + " has a negative or NaN time");
      entries_[std::move(key)] = ms;
    }
    if (at != end)
      fail(std::to_string(end - at) + " bytes after the last of " + std::to_string(count) +
           " entries");
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, double> entries_;
};

}  // namespace

std::string timingCacheCpuKey() {
  static const std::string key =
      "cpu=" + cpuModelName() + "|" + plan::cpuFeatureNames(plan::detectCpuFeatures());
  return key;
}

Result<std::unique_ptr<ITimingCache>> createTimingCache(const void* data, size_t bytes,
                                                        const std::string& source) {
  return guardResult<std::unique_ptr<ITimingCache>>(nullptr, [&] {
    auto cache = std::make_unique<TimingCache>();
    if (bytes) cache->read(static_cast<const uint8_t*>(data), bytes, source);
    return std::unique_ptr<ITimingCache>(std::move(cache));
  });
}

}  // namespace kiln
