// Writing a file another process may be reading: to a temporary file in the same folder, then
// renamed over the old one, so that a reader (an engine with the old plan memory-mapped) keeps
// the old file and never sees a truncated one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cli {

/// Replaces `path` with `bytes`; errors (kIoError) name the file and say it holds `what` ("plan").
void replaceFile(const std::string& path, const std::vector<uint8_t>& bytes,
                 const std::string& what);

}  // namespace kiln::cli
