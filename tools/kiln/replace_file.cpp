#include "replace_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "kiln/error.h"

namespace kiln::cli {

void replaceFile(const std::string& path, const std::vector<uint8_t>& bytes,
                 const std::string& what) {
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      throw Error(ErrorCode::kIoError,
                  path + ": cannot write the " + what + " (" + temporary + ")");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Error(ErrorCode::kIoError,
                path + ": cannot replace it with the new " + what + ": " + reason);
  }
}

}  // namespace kiln::cli
