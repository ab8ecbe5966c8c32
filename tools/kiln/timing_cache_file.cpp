#include "timing_cache_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "commands.h"
#include "kiln/error.h"
#include "replace_file.h"

namespace kiln::cli {

std::unique_ptr<ITimingCache> readTimingCacheFile(const std::string& path, ILogger& logger) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes;
  if (in) {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(ErrorCode::kIoError, path + ": cannot read the timing cache");
  } else if (errno != ENOENT) {
    throw Error(ErrorCode::kIoError,
                path + ": cannot open the timing cache: " + std::strerror(errno));
  }
  auto cache = createTimingCache(bytes.data(), bytes.size(), path);
  if (!cache.ok()) throw errorFromStatus(cache.status());
  logger.log(Severity::kINFO,
             bytes.empty()
                 ? "timing cache " + path + ": none yet, it will be written after the build"
                 : "timing cache " + path + ": " + std::to_string((*cache)->size()) + " entries");
  return std::move(*cache);
}

void writeTimingCacheFile(const std::string& path, const ITimingCache& cache) {
  replaceFile(path, cache.serialize(), "timing cache");
}

}  // namespace kiln::cli
