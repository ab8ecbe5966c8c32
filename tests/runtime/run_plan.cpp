// kiln_run_plan: loads a plan and runs it through the public runtime API, linked to
// libkiln_runtime alone (no optimizer, builder or protobuf), to show the runtime stands apart.
//
//   kiln_run_plan PLAN OUT_DIR        fills each float input with a fixed pattern, runs the plan,
//                                     writes OUT_DIR/inputs/<input>.npy and OUT_DIR/<output>.npy
//   kiln_run_plan --compare A.npy B.npy TOLERANCE
//                                     exits 1 unless |a - b| <= TOLERANCE * max(1, |b|) everywhere
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "kiln/engine.h"
#include "kiln/logger.h"
#include "kiln/npy.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "kiln_run_plan: %s\n", message.c_str());
  return 1;
}

// sin(0.37 i) over the input's elements, at its fixed dims or the opt shape of profile 0.
kiln::Result<kiln::Tensor> patternInput(const kiln::Engine& engine, const std::string& name) {
  kiln::Shape dims = engine.getTensorShape(name);
  for (int64_t d : dims)
    if (d < 0) dims = engine.getProfileShape(name, 0, kiln::OptProfileSelector::kOPT);
  if (engine.getTensorDataType(name) != kiln::DataType::kFloat32) {
    return kiln::Status(kiln::ErrorCode::kInvalidArgument, "input '" + name + "' is not float32");
  }
  kiln::Tensor t(kiln::DataType::kFloat32, dims);
  float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    data[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  return t;
}

int runPlan(const std::string& planPath, const std::filesystem::path& outDir) {
  kiln::StderrLogger logger;
  kiln::Runtime runtime(logger);
  auto engine = runtime.deserializeEngineFromFile(planPath);
  if (!engine) return fail(engine.status().toString());
  auto context = (*engine)->createExecutionContext();
  if (!context) return fail(context.status().toString());
  std::filesystem::create_directories(outDir / "inputs");
  for (int i = 0; i < (*engine)->getNbIOTensors(); ++i) {
    const std::string name = (*engine)->getIOTensorName(i);
    if ((*engine)->getTensorIOMode(name) != kiln::TensorIOMode::kINPUT ||
        (*engine)->hasDefaultValue(name))
      continue;
    auto input = patternInput(**engine, name);
    if (!input) return fail(input.status().toString());
    if (kiln::Status s = (*context)->setInputTensor(name, *input); !s.ok())
      return fail(s.toString());
    kiln::writeNpy((outDir / "inputs" / (name + ".npy")).string(), *input);
  }
  if (kiln::Status s = (*context)->execute(); !s.ok()) return fail(s.toString());
  for (int i = 0; i < (*engine)->getNbIOTensors(); ++i) {
    const std::string name = (*engine)->getIOTensorName(i);
    if ((*engine)->getTensorIOMode(name) != kiln::TensorIOMode::kOUTPUT) continue;
    auto output = (*context)->getOutputTensor(name);
    if (!output) return fail(output.status().toString());
    kiln::writeNpy((outDir / (name + ".npy")).string(), *output);
    std::printf("%s: %s\n", name.c_str(), output->describe().c_str());
  }
  return 0;
}

int compare(const std::string& actualPath, const std::string& expectedPath, double tolerance) {
  const kiln::Tensor a = kiln::readNpy(actualPath), b = kiln::readNpy(expectedPath);
  if (a.dtype() != kiln::DataType::kFloat32 || b.dtype() != kiln::DataType::kFloat32 ||
      a.shape() != b.shape()) {
    return fail(actualPath + " is " + a.describe() + " but " + expectedPath + " is " +
                b.describe());
  }
  double worst = 0;
  int64_t worstAt = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    const double excess = std::fabs(x - y) / std::max(1.0, std::fabs(y));
    if (!(excess <= worst)) worst = excess, worstAt = i;
  }
  if (!(worst <= tolerance)) {
    return fail(actualPath + " differs from " + expectedPath + " at element " +
                std::to_string(worstAt) + ": " + std::to_string(a.data<float>()[worstAt]) + " vs " +
                std::to_string(b.data<float>()[worstAt]));
  }
  std::printf("%s matches %s (largest difference %.3g)\n", actualPath.c_str(), expectedPath.c_str(),
              worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "--compare")
      return compare(argv[2], argv[3], std::stod(argv[4]));
    if (argc == 3) return runPlan(argv[1], argv[2]);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return fail("usage: kiln_run_plan PLAN OUT_DIR | kiln_run_plan --compare A.npy B.npy TOLERANCE");
}
