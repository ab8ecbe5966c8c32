// The timing cache (TensorRT's ITimingCache): the times the builder measured for its tactics
// (candidate kernels, docs/design.md "Tactics"), kept so that a rebuild, of the same model or of
// another one with the same layers, does not time them again.
//
//   BuilderConfig config;
//   config.setBuilderOptimizationLevel(3);
//   Result<std::unique_ptr<ITimingCache>> cache = createTimingCache(bytesOfAFileOrEmpty,
//   "cache.bin"); config.setTimingCache(cache.value().get());
//   ... buildSerializedNetwork(*network, config) ...
//   std::vector<uint8_t> bytes = cache.value()->serialize();  // write it back
//
// An entry's key names the CPU (model and features), the kiln version, the thread count, the
// layer (op, dtypes, shapes, attributes) and the candidate; entries timed on another CPU are kept
// (a cache may be shared between machines) but never used on this one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"

namespace kiln {

class KILN_API ITimingCache {
 public:
  virtual ~ITimingCache() = default;
  /// The cache as bytes: a versioned header, a checksum, then the entries (docs/plan-format.md).
  virtual std::vector<uint8_t> serialize() const = 0;
  /// Adds the entries of `other` this cache lacks; returns how many were added.
  virtual int64_t combine(const ITimingCache& other) = 0;
  /// Drops every entry.
  virtual void reset() = 0;
  /// Number of entries (of every CPU).
  virtual int64_t size() const = 0;
  /// Entries whose CPU is not this machine's (kept, never used here).
  virtual int64_t entriesForOtherCpus() const = 0;
  /// The milliseconds stored under a key, if any.
  virtual std::optional<double> query(const std::string& key) const = 0;
  /// Stores (or replaces) the milliseconds of a key.
  virtual void update(const std::string& key, double milliseconds) = 0;
  /// Every key, sorted.
  virtual std::vector<std::string> keys() const = 0;
};

/// A cache from serialize()'s bytes; an empty buffer makes an empty cache. Bytes that are not a
/// timing cache, of another cache version, truncated or failing the checksum are an
/// kINVALID_ARGUMENT error that names `source` (a file name, for the message).
KILN_API Result<std::unique_ptr<ITimingCache>> createTimingCache(const void* data, size_t bytes,
                                                                 const std::string& source = "");

/// The key part that names this machine's CPU: "cpu=<model name>|<features>".
KILN_API std::string timingCacheCpuKey();

}  // namespace kiln
