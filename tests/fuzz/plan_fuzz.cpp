// Fuzz target: a .kiln plan, read as `kiln inspect PLAN` and `kiln run PLAN` read it (the reader's
// validation, the memory plan at profile 0, the engine's kernels restored, a context made). The
// header's file size, the packed section's size and checksum and the header checksum are written
// over the fuzzer's bytes before reading, so that mutants get past the checksums to the sections
// (the checksums themselves are tested in tests/unit/plan_format_test.cpp).
#include <cstring>
#include <vector>

#include "engine/memory_plan.h"
#include "engine/plan_bytes.h"
#include "engine/plan_format.h"
#include "fuzz_support.h"
#include "kiln/engine.h"

namespace {

using namespace kiln;

template <class T>
T loadAt(const std::vector<uint8_t>& bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

template <class T>
void storeAt(std::vector<uint8_t>& bytes, size_t at, T v) {
  std::memcpy(bytes.data() + at, &v, sizeof(T));
}

// What a writer would have put in the header and the packed section's entry for these bytes.
void fixSizesAndChecksums(std::vector<uint8_t>& bytes) {
  if (bytes.size() < plan::kHeaderSize || !plan::looksLikePlan(bytes.data(), bytes.size())) return;
  const uint64_t size = bytes.size();
  storeAt<uint64_t>(bytes, 40, size);
  const uint64_t entries =
      std::min<uint64_t>(loadAt<uint32_t>(bytes, 36), (size - plan::kHeaderSize) / 24);
  for (uint64_t s = 0; s < entries; ++s) {
    const size_t entry = plan::kHeaderSize + s * 24;
    if (loadAt<uint32_t>(bytes, entry) != plan::kPackedSection) continue;
    const uint64_t offset = loadAt<uint64_t>(bytes, entry + 8);
    if (offset > size) break;
    storeAt<uint64_t>(bytes, entry + 16, size - offset);
    storeAt<uint32_t>(bytes, entry + 4, plan::crc32c(bytes.data() + offset, size - offset));
    break;
  }
  plan::signPlan(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  fixSizesAndChecksums(bytes);
  fuzz::refusedOnlyByKilnErrors([&] {
    const plan::Plan p = plan::readPlan(bytes.data(), bytes.size());
    planMemoryAtProfile(p, 0, OptProfileSelector::kOPT);
  });
  fuzz::SilentLogger logger;
  Runtime runtime(logger);
  auto engine = runtime.deserializeEngine(bytes.data(), bytes.size());
  if (!engine.ok()) {
    fuzz::refusedOnlyByKilnErrors(engine.status());
    return 0;
  }
  auto context = (*engine)->createExecutionContext();
  if (!context.ok()) fuzz::refusedOnlyByKilnErrors(context.status());
  return 0;
}
