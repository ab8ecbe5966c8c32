#include "build/calibration_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

#include "build/calibration_cache.h"
#include "build/calibration_stats.h"
#include "engine/executor.h"
#include "engine/plan_format.h"
#include "kiln/error.h"

namespace kiln::build {

namespace {

[[noreturn]] void badBatch(int64_t batch, const std::string& input, const std::string& message) {
  throw Error(ErrorCode::kInvalidArgument,
              "calibration batch " + std::to_string(batch) + ", input '" + input + "': " + message);
}

void checkBatch(const std::vector<CalibrationInput>& inputs, const std::vector<Tensor>& batch,
                int64_t index) {
  if (batch.size() != inputs.size()) {
    throw Error(ErrorCode::kInvalidArgument, "calibration batch " + std::to_string(index) + ": " +
                                                 std::to_string(batch.size()) + " tensors for " +
                                                 std::to_string(inputs.size()) + " inputs");
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const CalibrationInput& in = inputs[k];
    const Tensor& t = batch[k];
    if (t.dtype() != in.dtype)
      badBatch(index, in.name,
               "is " + dataTypeName(t.dtype()) + ", the network expects " + dataTypeName(in.dtype));
    bool fits = t.rank() == in.dims.size();
    for (size_t d = 0; fits && d < in.dims.size(); ++d)
      fits = in.dims[d] < 0 || in.dims[d] == t.dim(d);
    if (!fits)
      badBatch(index, in.name,
               "shape " + shapeToString(t.shape()) + " does not match the network's " +
                   shapeToString(in.dims));
    if (t.dtype() != DataType::kFloat32) continue;
    const float* x = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!std::isfinite(x[i]))
        badBatch(index, in.name,
                 std::string("holds ") + (std::isnan(x[i]) ? "NaN" : "infinity") + " at element " +
                     std::to_string(i));
    }
  }
}

std::string describeRange(const std::string& tensor, const ActivationQuantization& a,
                          CalibrationAlgoType algo) {
  std::ostringstream os;
  os << std::setprecision(6) << "int8: tensor '" << tensor << "': range ["
     << a.scale * (-128 - a.zeroPoint) << ", " << a.scale * (127 - a.zeroPoint) << "], scale "
     << a.scale << ", zero point " << a.zeroPoint << " (" << calibrationAlgoName(algo) << ")";
  return os.str();
}

// Feeds the batches through an Executor whose outputs are the observed tensors.
class CalibrationPass {
 public:
  CalibrationPass(const ir::Graph& graph, const std::vector<int>& observed,
                  const std::vector<CalibrationInput>& inputs, IInt8Calibrator& calibrator)
      : calibrator_(calibrator), start_(std::chrono::steady_clock::now()) {
    for (const CalibrationInput& in : inputs) inputIds_.push_back(graph.findValue(in.name));
    // A graph input is observed in the batch itself, any other tensor as an output of the executor.
    auto g = std::make_shared<ir::Graph>(graph);
    g->outputs.clear();
    for (int id : observed) {
      auto input = std::find(inputIds_.begin(), inputIds_.end(), id);
      if (input != inputIds_.end()) {
        source_.push_back({true, static_cast<size_t>(input - inputIds_.begin())});
      } else {
        source_.push_back({false, g->outputs.size()});
        g->outputs.push_back(id);
      }
    }
    if (!g->outputs.empty()) executor_ = std::make_unique<Executor>(std::move(g));
  }

  /// The observed tensors for one batch.
  std::vector<Tensor> run(const std::vector<Tensor>& batch) {
    std::vector<std::pair<int, Tensor>> feeds;
    for (size_t k = 0; k < batch.size(); ++k) feeds.emplace_back(inputIds_[k], batch[k]);
    std::vector<Tensor> outputs =
        executor_ ? executor_->run(feeds, &memory_) : std::vector<Tensor>{};
    std::vector<Tensor> observed;
    for (const Source& s : source_)
      observed.push_back(s.isInput ? batch[s.index] : outputs[s.index]);
    return observed;
  }

  void progress(int64_t done, int64_t total) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = total > 0 && done > 0 ? elapsed / static_cast<double>(done) *
                                                    static_cast<double>(total - done)
                                              : -1;
    calibrator_.reportProgress(done, total, left);
  }

 private:
  IInt8Calibrator& calibrator_;
  std::chrono::steady_clock::time_point start_;
  struct Source {
    bool isInput;  // the batch's tensor `index`, else the executor's output `index`
    size_t index;
  };
  std::vector<int> inputIds_;
  std::vector<Source> source_;  // per observed tensor
  std::unique_ptr<Executor> executor_;
  ExecutorMemory memory_;
};

std::vector<ActivationQuantization> calibrateFromBatches(
    const ir::Graph& graph, const QuantizationTargets& targets,
    const std::vector<CalibrationInput>& inputs, IInt8Calibrator& calibrator,
    CalibrationAlgoType algo) {
  const bool twoPasses = needsHistogram(algo);
  const int64_t batchSize = std::max(1, calibrator.getBatchSize());
  const int64_t batches = calibrator.getNbBatches();
  const int64_t total = batches > 0 ? batches * batchSize * (twoPasses ? 2 : 1) : -1;
  CalibrationPass pass(graph, targets.activations, inputs, calibrator);
  std::vector<TensorStatistics> stats(targets.activations.size());
  std::vector<std::vector<Tensor>> kept;  // the batches, read again by the histogram pass
  std::vector<Tensor> batch;
  int64_t read = 0;
  for (; calibrator.getBatchTensors(inputs, batch); ++read) {
    checkBatch(inputs, batch, read);
    std::vector<Tensor> observed = pass.run(batch);
    for (size_t k = 0; k < stats.size(); ++k) {
      if (observed[k].dtype() == DataType::kFloat32)
        stats[k].observeRange(observed[k].data<float>(), observed[k].numel());
    }
    if (twoPasses) kept.push_back(std::move(batch));
    batch.clear();
    pass.progress((read + 1) * batchSize, total);
  }
  if (read == 0) {
    std::string names;
    for (const CalibrationInput& in : inputs)
      names += (names.empty() ? "'" : ", '") + in.name + "'";
    throw Error(ErrorCode::kInvalidArgument,
                "the calibrator returned no batches (getBatch was false at once): input " + names +
                    " needs at least one calibration batch");
  }
  const int64_t allSamples = read * batchSize * (twoPasses ? 2 : 1);
  if (twoPasses) {
    for (TensorStatistics& s : stats) s.startHistogram();
    for (size_t b = 0; b < kept.size(); ++b) {
      std::vector<Tensor> observed = pass.run(kept[b]);
      for (size_t k = 0; k < stats.size(); ++k) {
        if (observed[k].dtype() == DataType::kFloat32)
          stats[k].observeHistogram(observed[k].data<float>(), observed[k].numel());
      }
      pass.progress((read + static_cast<int64_t>(b) + 1) * batchSize, allSamples);
    }
  }
  const double percentile = calibrator.getPercentile();
  std::vector<ActivationQuantization> out;
  for (size_t k = 0; k < stats.size(); ++k) {
    const std::string& name = graph.value(targets.activations[k]).name;
    if (!stats[k].seen()) {
      throw Error(
          ErrorCode::kInvalidArgument,
          "calibration: tensor '" + name + "' held no number (NaN everywhere) in any batch");
    }
    const Int8Params params = int8Params(chooseRange(stats[k], algo, percentile));
    out.push_back({name, params.scale, params.zeroPoint});
  }
  return out;
}

}  // namespace

std::vector<CalibrationInput> calibrationInputs(const ir::Graph& graph,
                                                const std::map<int, Shape>& shapes) {
  std::vector<CalibrationInput> inputs;
  for (int id : graph.inputs) {
    const ir::Value& v = graph.value(id);
    if (v.constant) continue;
    CalibrationInput in{v.name, v.type.dtype, {}};
    if (auto it = shapes.find(id); it != shapes.end()) {
      in.dims = it->second;
    } else if (v.type.shape) {
      for (const ir::Dim& d : *v.type.shape) in.dims.push_back(d.isKnown() ? d.value : -1);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + v.name + "' has no known rank: calibration needs its shape");
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

CalibrationResult calibrateActivations(const ir::Graph& graph, const QuantizationTargets& targets,
                                       const std::vector<CalibrationInput>& inputs,
                                       IInt8Calibrator& calibrator, ILogger& logger) {
  const CalibrationAlgoType algo = calibrator.getAlgorithm();
  const std::string fingerprint = networkFingerprint(graph, targets);
  CalibrationResult result;
  size_t length = 0;
  const void* cached = calibrator.readCalibrationCache(length);
  CalibrationAlgoType used = algo;
  if (cached && length > 0) {
    const CalibrationCache cache =
        parseCalibrationCache(std::string(static_cast<const char*>(cached), length));
    result.activations = matchCalibrationCache(cache, graph, targets.activations, fingerprint);
    result.fromCache = true;
    used = cache.algorithm;
    if (cache.algorithm != algo) {
      logger.log(Severity::kWARNING, std::string("the calibration cache was made by the ") +
                                         calibrationAlgoName(cache.algorithm) +
                                         " calibrator, not " + calibrationAlgoName(algo) +
                                         "; its scales are used");
    }
  } else {
    result.activations = calibrateFromBatches(graph, targets, inputs, calibrator, algo);
    const std::string text =
        formatCalibrationCache({algo, plan::kKilnVersion, fingerprint, result.activations});
    calibrator.writeCalibrationCache(text.data(), text.size());
  }
  for (const ActivationQuantization& a : result.activations)
    result.ranges.push_back(describeRange(a.tensor, a, used));
  return result;
}

}  // namespace kiln::build
