// kiln._kiln.Session: kiln::Session for kiln.InferenceSession (python/kiln/_session.py), which
// adds ONNX Runtime's Python-side behaviour (NodeArg, providers, options, IOBinding).
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "engine/trace_profiler.h"
#include "errors.h"
#include "kiln/session.h"
#include "tensors.h"

namespace kiln::python {

namespace {

using Clock = std::chrono::steady_clock;

// The terminate flag of a Python RunOptions, read by the run while the GIL is released.
struct RunFlag {
  std::atomic<bool> value{false};
};

class PySession {
 public:
  PySession(const std::string& path, const SessionOptions& options, bool profile)
      : profiler_(profile ? std::make_unique<TraceProfiler>() : nullptr) {
    SessionOptions o = withProfiler(options);
    nb::gil_scoped_release release;  // loading and optimizing a large model takes a while
    session_ = std::make_unique<Session>(path, o);
  }
  PySession(nb::bytes data, const SessionOptions& options, bool profile,
            const std::string& externalDataDir)
      : profiler_(profile ? std::make_unique<TraceProfiler>() : nullptr) {
    SessionOptions o = withProfiler(options);
    // The bytes object stays alive (and unchanged: bytes are immutable) while the GIL is released.
    nb::gil_scoped_release release;
    session_ = std::make_unique<Session>(data.c_str(), data.size(), o, externalDataDir);
  }

  nb::list describe(bool ofInputs) const {
    nb::list result;
    for (const TensorInfo& info : ofInputs ? session_->inputs() : session_->outputs()) {
      nb::list shape;
      for (size_t i = 0; i < info.shape.size(); ++i) {
        if (info.shape[i] >= 0)
          shape.append(info.shape[i]);
        else if (!info.dimNames[i].empty())
          shape.append(info.dimNames[i]);
        else
          shape.append(nb::none());
      }
      result.append(nb::make_tuple(info.name, shape, ortTypeName(info), info.optional));
    }
    return result;
  }

  nb::dict metadata() const {
    const ModelMetadata& m = session_->metadata();
    nb::dict d;
    d["producer_name"] = m.producerName;
    d["graph_name"] = m.graphName;
    d["graph_description"] = m.graphDescription;
    d["domain"] = m.domain;
    d["description"] = m.description;
    // onnxruntime reports a model without model_version as version INT64_MAX.
    d["version"] = m.version.value_or(std::numeric_limits<int64_t>::max());
    nb::dict custom;
    for (const auto& [k, v] : m.custom) custom[k.c_str()] = v;
    d["custom_metadata_map"] = custom;
    return d;
  }

  nb::list run(nb::handle outputNames, nb::dict feed, const RunFlag* terminate) {
    const std::vector<size_t> selected = selectOutputs(outputNames);
    NamedTensors inputs = tensorsOf(feed);
    NamedTensors results;
    RunOptions options;
    if (terminate) options.terminate = &terminate->value;
    {
      const auto start = Clock::now();
      nb::gil_scoped_release release;
      results = session_->run(inputs, options);
      if (profiler_) profiler_->recordRun(start);
    }
    nb::list out;
    for (size_t index : selected) out.append(tensorToPython(results[index].second));
    return out;
  }

  /// The profile's events since the last call, oldest first, as Chrome-trace JSON (pid `pid`).
  std::string takeProfile(int pid) {
    return profiler_ ? chromeTraceJson(profiler_->take(), pid) : "[]";
  }

  /// For bench/python_overhead.py: `iterations` calls of the C++ Session::run on `feed`
  /// (converted once), each timed; the seconds of each.
  std::vector<double> timeCppRuns(nb::dict feed, int iterations) {
    NamedTensors inputs = tensorsOf(feed);
    std::vector<double> seconds;
    seconds.reserve(static_cast<size_t>(std::max(iterations, 0)));
    nb::gil_scoped_release release;
    for (int i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      NamedTensors results = session_->run(inputs);
      seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    return seconds;
  }

 private:
  SessionOptions withProfiler(SessionOptions options) const {
    options.profiler = profiler_.get();
    return options;
  }

  const TensorInfo* findInput(const std::string& name) const {
    for (const TensorInfo& info : session_->inputs())
      if (info.name == name) return &info;
    return nullptr;
  }

  // The feed's tensors, after ONNX Runtime's Python-side check that no required input is missing.
  NamedTensors tensorsOf(nb::dict feed) const {
    nb::list missing;
    for (const TensorInfo& info : session_->inputs()) {
      if (!info.optional && !info.isOptionalType && !feed.contains(info.name.c_str()))
        missing.append(info.name);
    }
    if (missing.size() != 0) {
      const std::string given = nb::repr(nb::list(feed.keys())).c_str();
      throw nb::value_error(("Required inputs (" + std::string(nb::repr(missing).c_str()) +
                             ") are missing from input feed (" + given + ").")
                                .c_str());
    }
    NamedTensors tensors;
    tensors.reserve(feed.size());
    for (auto [key, value] : feed) {
      if (!PyUnicode_Check(key.ptr())) throw nb::type_error("input names must be str");
      std::string name = nb::cast<std::string>(key);
      const TensorInfo* info = findInput(name);
      // A name the model does not have gets no value: Session::run rejects it, listing the inputs;
      // but a list needs the input's type first, and onnxruntime fails there.
      if (!info && PyList_Check(value.ptr())) {
        throw std::runtime_error("Failed to find input with name: " + name +
                                 " in the model input def list");
      }
      Tensor tensor = info ? tensorFromPython(value, *info) : Tensor();
      tensors.emplace_back(std::move(name), std::move(tensor));
    }
    return tensors;
  }

  std::vector<size_t> selectOutputs(nb::handle names) const {
    const auto& outputs = session_->outputs();
    std::vector<size_t> selected;
    if (names.is_none()) {
      for (size_t i = 0; i < outputs.size(); ++i) selected.push_back(i);
      return selected;
    }
    if (PyUnicode_Check(names.ptr()))
      throw nb::type_error("output_names must be a list of str or None, not a str");
    for (nb::handle item : names) {
      if (!PyUnicode_Check(item.ptr())) throw nb::type_error("output_names must hold str");
      const std::string name = nb::cast<std::string>(item);
      auto it = std::find_if(outputs.begin(), outputs.end(),
                             [&](const TensorInfo& o) { return o.name == name; });
      if (it == outputs.end())
        throw OrtError(OrtCode::kInvalidArgument, "Invalid output name:" + name);
      selected.push_back(static_cast<size_t>(it - outputs.begin()));
    }
    return selected;
  }

  std::unique_ptr<TraceProfiler>
      profiler_;  // declared first: the session reports to it until destroyed
  std::unique_ptr<Session> session_;
};

SessionOptions makeOptions(int threads, bool optimize, bool nchwcLayout, int64_t maxLoopIterations,
                           std::vector<std::string> extraOutputs, bool markAllOutputs, bool bf16,
                           bool fp16, uint64_t allocationLimitBytes) {
  SessionOptions o;
  o.bf16 = bf16;
  o.fp16 = fp16;
  o.allocationLimitBytes = allocationLimitBytes;
  o.threads = threads;
  o.optimize = optimize;
  o.nchwcLayout = nchwcLayout;
  o.maxLoopIterations = maxLoopIterations;
  o.extraOutputs = std::move(extraOutputs);
  o.markAllOutputs = markAllOutputs;
  return o;
}

}  // namespace

void bindSession(nb::module_& m) {
  nb::class_<RunFlag>(m, "RunFlag",
                      "A flag another thread may set to stop a run (RunOptions.terminate).")
      .def(nb::init<>())
      .def_prop_rw(
          "value", [](const RunFlag& f) { return f.value.load(); },
          [](RunFlag& f, bool v) { f.value.store(v); },
          "True once the runs given this flag should stop.");
  nb::class_<PySession>(m, "Session",
                        "A loaded model (kiln::Session); kiln.InferenceSession wraps it.")
      .def(
          "__init__",
          [](PySession* self, const std::string& path, int threads, bool optimize, bool nchwcLayout,
             bool profile, int64_t maxLoopIterations, std::vector<std::string> extraOutputs,
             bool markAllOutputs, bool bf16, bool fp16, uint64_t allocationLimitBytes) {
            new (self) PySession(path,
                                 makeOptions(threads, optimize, nchwcLayout, maxLoopIterations,
                                             std::move(extraOutputs), markAllOutputs, bf16, fp16,
                                             allocationLimitBytes),
                                 profile);
          },
          nb::arg("path"), nb::arg("threads") = 0, nb::arg("optimize") = true,
          nb::arg("nchwc_layout") = true, nb::arg("profile") = false,
          nb::arg("max_loop_iterations") = 0, nb::arg("extra_outputs") = std::vector<std::string>{},
          nb::arg("mark_all_outputs") = false, nb::arg("bf16") = false, nb::arg("fp16") = false,
          nb::arg("allocation_limit_bytes") = 0,
          "Loads and prepares the model file at `path`; extra_outputs (and with mark_all_outputs "
          "every node "
          "output) become outputs after the model's own.")
      .def_static(
          "from_bytes",
          [](nb::bytes data, int threads, bool optimize, bool nchwcLayout, bool profile,
             int64_t maxLoopIterations, std::vector<std::string> extraOutputs, bool markAllOutputs,
             bool bf16, bool fp16, uint64_t allocationLimitBytes,
             const std::string& externalDataDir) {
            return new PySession(data,
                                 makeOptions(threads, optimize, nchwcLayout, maxLoopIterations,
                                             std::move(extraOutputs), markAllOutputs, bf16, fp16,
                                             allocationLimitBytes),
                                 profile, externalDataDir);
          },
          nb::arg("data"), nb::arg("threads") = 0, nb::arg("optimize") = true,
          nb::arg("nchwc_layout") = true, nb::arg("profile") = false,
          nb::arg("max_loop_iterations") = 0, nb::arg("extra_outputs") = std::vector<std::string>{},
          nb::arg("mark_all_outputs") = false, nb::arg("bf16") = false, nb::arg("fp16") = false,
          nb::arg("allocation_limit_bytes") = 0, nb::arg("external_data_dir") = "",
          "Loads a serialized ModelProto; external data files are looked up in external_data_dir.")
      .def(
          "inputs", [](const PySession& s) { return s.describe(true); },
          "[(name, shape, type, overridable)] of the model's inputs; shape holds ints, dim names "
          "and None.")
      .def(
          "outputs", [](const PySession& s) { return s.describe(false); },
          "[(name, shape, type, False)] of the outputs.")
      .def("metadata", &PySession::metadata, "The model's ModelMetadata fields as a dict.")
      .def("run", &PySession::run, nb::arg("output_names").none(), nb::arg("input_feed"),
           nb::arg("terminate").none() = nb::none(),
           "Runs the model with the GIL released; returns the named outputs (all when None) in "
           "order. "
           "The run stops with an error once `terminate` (a RunFlag) is set, from any thread.")
      .def("take_profile", &PySession::takeProfile, nb::arg("pid"),
           "The trace events recorded since the last call (profile=True), as Chrome-trace JSON.")
      .def("_time_cpp_runs", &PySession::timeCppRuns, nb::arg("input_feed"), nb::arg("iterations"),
           "For benchmarks: seconds of each of `iterations` C++ Session::run calls on the feed.");
}

}  // namespace kiln::python
