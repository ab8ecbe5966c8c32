// `kiln build --timing-cache FILE`: the cache read from FILE when it exists (an empty one
// otherwise), and written back after the build.
#pragma once
#include <memory>
#include <string>

#include "kiln/logger.h"
#include "kiln/timing_cache.h"

namespace kiln::cli {

/// The cache in `path`, or an empty one when there is no such file; a file that is not a valid
/// cache is an error naming it.
std::unique_ptr<ITimingCache> readTimingCacheFile(const std::string& path, ILogger& logger);

/// Writes the cache to a temporary file beside `path`, then renames it over `path`.
void writeTimingCacheFile(const std::string& path, const ITimingCache& cache);

}  // namespace kiln::cli
