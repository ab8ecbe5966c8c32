// Fuzz target: Session::run on the ONNX backend node tests (Debian's libonnx-testdata, or the
// folder $KILN_FUZZ_NODE_MODELS) and on the com.microsoft operators' seed models
// (tests/fuzz/corpus/onnx/contrib_*.onnx, or those of $KILN_FUZZ_CONTRIB_MODELS), with input
// tensors whose shapes and values come from the fuzzer. Bytes:
//   u16 model index (into the node tests sorted by name, then the contrib models sorted by name)
//   per model input: u8 mode (< 224: the declared shape, each dynamic dim a u8 % 6; else rank
//   mode % 5, each dim a u8 % 6), then the tensor's bytes (bool values taken mod 2, low-precision
//   types masked to their bits).
// Sessions are made once per model (one thread, Loop iterations capped) and kept.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kiln/session.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

constexpr int64_t kMaxElements = 1 << 14;
// Run-time sizes come from the fuzzed values (HannWindow's size, Range's limit...), and at -O0 with
// ASan a few float ops over a 256 MiB tensor outlast libFuzzer's timeout without being a defect
// (the 2-hour campaign's one timeout: test_hammingwindow_symmetric_expanded). 16 MiB keeps a run
// to seconds; the limit's refusals are exercised the same.
constexpr uint64_t kRunTensorByteLimit = uint64_t{16} << 20;

// The node tests' models, sorted, then the contrib seed models, sorted: appended, so that a seed's
// index into the node tests keeps its model.
std::vector<fs::path> fuzzedModels() {
  const char* dir = std::getenv("KILN_FUZZ_NODE_MODELS");
  const fs::path root = dir ? dir : "/usr/share/libonnx-testdata/data/node";
  std::vector<fs::path> models;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec))
    if (fs::exists(e.path() / "model.onnx")) models.push_back(e.path() / "model.onnx");
  std::sort(models.begin(), models.end());
  if (models.empty()) {
    std::fprintf(stderr,
                 "kiln fuzz: no node test models under %s (install libonnx-testdata or set "
                 "KILN_FUZZ_NODE_MODELS)\n",
                 root.c_str());
    std::abort();
  }
  const char* contribDir = std::getenv("KILN_FUZZ_CONTRIB_MODELS");
  std::vector<fs::path> contrib;
  for (const fs::directory_entry& e :
       fs::directory_iterator(contribDir ? contribDir : KILN_FUZZ_CONTRIB_MODEL_DIR, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("contrib_", 0) == 0 && e.path().extension() == ".onnx")
      contrib.push_back(e.path());
  }
  std::sort(contrib.begin(), contrib.end());
  models.insert(models.end(), contrib.begin(), contrib.end());
  return models;
}

// The model's session, or nullptr when kiln refuses the model (an unsupported op): made once.
const Session* sessionFor(const fs::path& model) {
  static std::map<fs::path, std::unique_ptr<Session>> sessions;
  const auto found = sessions.find(model);
  if (found != sessions.end()) return found->second.get();
  std::unique_ptr<Session>& session = sessions[model];
  if (std::getenv("KILN_FUZZ_VERBOSE"))
    std::fprintf(stderr, "kiln fuzz: model %s\n", model.c_str());
  SessionOptions options;
  options.threads = 1;
  options.maxLoopIterations = 1000;
  std::ifstream in(model, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fuzz::refusedOnlyByKilnErrors([&] {
    session = std::make_unique<Session>(bytes.data(), bytes.size(), options,
                                        model.parent_path().string());
  });
  return session.get();
}

bool fuzzable(const TensorInfo& info) {
  return !info.isSequence && !info.isOptionalType && info.dtype != DataType::kString &&
         isSupportedDataType(info.dtype);
}

Shape inputShape(const TensorInfo& info, fuzz::ByteReader& in) {
  const uint8_t mode = in.u8();
  Shape shape;
  if (mode < 224 && info.hasShape) {
    for (int64_t d : info.shape) shape.push_back(d >= 0 ? d : in.u8() % 6);
  } else {
    for (int r = mode % 5; r > 0; --r) shape.push_back(in.u8() % 6);
  }
  return shape;
}

void fillValues(Tensor& t, fuzz::ByteReader& in) {
  auto* bytes = static_cast<uint8_t*>(t.raw());
  in.fill(bytes, t.byteSize());
  uint8_t mask = 0xff;
  if (t.dtype() == DataType::kBool) mask = 1;
  if (t.dtype() == DataType::kUint4 || t.dtype() == DataType::kInt4 ||
      t.dtype() == DataType::kFloat4E2M1)
    mask = 0xf;
  if (t.dtype() == DataType::kUint2 || t.dtype() == DataType::kInt2) mask = 0x3;
  for (size_t i = 0; mask != 0xff && i < t.byteSize(); ++i) bytes[i] &= mask;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::fuzz::setUpFuzzing(kRunTensorByteLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<fs::path> models = fuzzedModels();
  fuzz::ByteReader in(data, size);
  const Session* session = sessionFor(models[in.u16() % models.size()]);
  if (!session) return 0;
  NamedTensors inputs;
  for (const TensorInfo& info : session->inputs()) {
    if (!fuzzable(info)) return 0;
    const Shape shape = inputShape(info, in);
    if (shapeNumel(shape) > kMaxElements) return 0;
    Tensor t(info.dtype, shape);
    fillValues(t, in);
    inputs.emplace_back(info.name, std::move(t));
  }
  fuzz::refusedOnlyByKilnErrors([&] { session->run(inputs); });
  return 0;
}
