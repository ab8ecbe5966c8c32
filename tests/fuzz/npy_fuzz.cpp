// Fuzz target: input files in numpy's formats, as `kiln run --input x=FILE` reads them: an .npy
// file, or an .npz archive (a zip of .npy files, stored or deflated) when the bytes start as a zip.
#include <sstream>
#include <string>

#include "fuzz_support.h"
#include "kiln/npy.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::refusedOnlyByKilnErrors([&] {
    if (bytes.rfind("PK", 0) == 0) {
      kiln::readNpzBytes(bytes, "<fuzz>.npz");
    } else {
      std::istringstream in(bytes);
      kiln::readNpy(in, "<fuzz>.npy");
    }
  });
  return 0;
}
