// Builder, IBuilderConfig, IOptimizationProfile and the serialized plan (IHostMemory).
#include <Python.h>

#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "kiln/builder.h"
#include "kiln/error.h"
#include "kiln/timing_cache.h"
#include "trt_calibrator.h"
#include "trt_common.h"

namespace kiln::python {

namespace {

// A serialized plan, exported through the buffer protocol (open(...).write() and
// Runtime.deserialize_cuda_engine take it as it is; bytes(plan) copies it).
struct HostMemory {
  std::vector<uint8_t> bytes;
};

int hostMemoryGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  HostMemory* h = nb::inst_ptr<HostMemory>(self);
  return PyBuffer_FillInfo(view, self, h->bytes.data(), static_cast<Py_ssize_t>(h->bytes.size()), 1,
                           flags);
}

PyType_Slot hostMemorySlots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(hostMemoryGetBuffer)},
                                 {0, nullptr}};

enum class MemoryPoolType { kWORKSPACE = 0 };

// BuilderFlag by bit index, as TensorRT numbers its flags (config.flags = 1 <<
// int(BuilderFlag.FP16)).
enum class FlagIndex : uint32_t {
  kFP16 = 0,
  kINT8 = 1,
  kDISABLE_NCHWC_LAYOUT = 2,
  kBF16 = 3,
  kOBEY_PRECISION_CONSTRAINTS = 4,
  kPREFER_PRECISION_CONSTRAINTS = 5
};
static_assert(1u << static_cast<uint32_t>(FlagIndex::kFP16) ==
              static_cast<uint32_t>(BuilderFlag::kFP16));
static_assert(1u << static_cast<uint32_t>(FlagIndex::kINT8) ==
              static_cast<uint32_t>(BuilderFlag::kINT8));
static_assert(1u << static_cast<uint32_t>(FlagIndex::kDISABLE_NCHWC_LAYOUT) ==
              static_cast<uint32_t>(BuilderFlag::kDISABLE_NCHWC_LAYOUT));
static_assert(1u << static_cast<uint32_t>(FlagIndex::kBF16) ==
              static_cast<uint32_t>(BuilderFlag::kBF16));
static_assert(1u << static_cast<uint32_t>(FlagIndex::kOBEY_PRECISION_CONSTRAINTS) ==
              static_cast<uint32_t>(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS));
static_assert(1u << static_cast<uint32_t>(FlagIndex::kPREFER_PRECISION_CONSTRAINTS) ==
              static_cast<uint32_t>(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS));
constexpr uint32_t kKnownFlags = 0b111111;

BuilderFlag flagOf(FlagIndex index) {
  return static_cast<BuilderFlag>(1u << static_cast<uint32_t>(index));
}

struct PyBuilder {
  std::shared_ptr<PyLogger> logger;
  std::unique_ptr<Builder> builder;
};

// TensorRT's NetworkDefinitionCreationFlag: explicit batch is the only mode kiln has.
enum class NetworkFlag { kEXPLICIT_BATCH = 0, kSTRONGLY_TYPED = 1 };

// The Python calibrator set as config.int8_calibrator, kept as an attribute of the config object.
constexpr const char* kCalibratorAttr = "_int8_calibrator";
// The ITimingCache set with config.set_timing_cache, kept (alive) as an attribute of the config
// object.
constexpr const char* kTimingCacheAttr = "_timing_cache";

std::vector<uint8_t> buildPlan(PyBuilder& b, PyNetwork& network, nb::handle configObject) {
  BuilderConfig config = nb::cast<const BuilderConfig&>(configObject);
  std::unique_ptr<PyCalibrator> calibrator;
  if (nb::hasattr(configObject, kCalibratorAttr) && !configObject.attr(kCalibratorAttr).is_none()) {
    calibrator = std::make_unique<PyCalibrator>(configObject.attr(kCalibratorAttr));
    config.setInt8Calibrator(calibrator.get());
  }
  if (nb::hasattr(configObject, kTimingCacheAttr) && !configObject.attr(kTimingCacheAttr).is_none())
    config.setTimingCache(nb::cast<ITimingCache*>(configObject.attr(kTimingCacheAttr)));
  Result<std::vector<uint8_t>> plan = [&] {
    nb::gil_scoped_release
        release;  // Python custom ops' shape functions and calibrators take it back
    return b.builder->buildSerializedNetwork(*network.network, config);
  }();
  check(plan.status());
  return std::move(*plan);
}

nb::list profileShapes(const OptimizationProfile& p, const std::string& name) {
  nb::list shapes;
  for (OptProfileSelector s :
       {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX}) {
    shapes.append(dimsTuple(p.getDimensions(name, s)));
  }
  return shapes;
}

}  // namespace

void bindTrtBuilder(nb::module_& m) {
  nb::class_<HostMemory>(
      m, "IHostMemory", nb::type_slots(hostMemorySlots),
      "A serialized engine (plan); supports the buffer protocol, so open(path, 'wb').write(plan) "
      "and bytes(plan) work.")
      .def_prop_ro("nbytes", [](const HostMemory& h) { return h.bytes.size(); })
      .def("__len__", [](const HostMemory& h) { return h.bytes.size(); })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });

  nb::enum_<FlagIndex>(m, "BuilderFlag", nb::is_arithmetic(),
                       "Build flags, numbered by bit as TensorRT's (1 << int(flag)).")
      .value("FP16", FlagIndex::kFP16,
             "Allow FP16 layers (accepted; layers still run in float32, with a warning).")
      .value("INT8", FlagIndex::kINT8,
             "Allow INT8 layers: with config.int8_calibrator, Conv/MatMul/Gemm are quantized.")
      .value("DISABLE_NCHWC_LAYOUT", FlagIndex::kDISABLE_NCHWC_LAYOUT,
             "Keep every tensor NCHW (kiln's own flag).")
      .value("BF16", FlagIndex::kBF16,
             "Allow BF16 Conv, MatMul and Gemm layers (FP32 sums) where the CPU has AVX512_BF16 "
             "and the builder "
             "measures them faster (else FP32, with a warning without AVX512_BF16).")
      .value("OBEY_PRECISION_CONSTRAINTS", FlagIndex::kOBEY_PRECISION_CONSTRAINTS,
             "Layer precisions (ILayer.precision) must be met; the build fails where one cannot.")
      .value("PREFER_PRECISION_CONSTRAINTS", FlagIndex::kPREFER_PRECISION_CONSTRAINTS,
             "Layer precisions (ILayer.precision) are met where a kernel allows, else a warning.");
  nb::enum_<MemoryPoolType>(
      m, "MemoryPoolType", nb::is_arithmetic(),
      "Memory pools of set_memory_pool_limit (WORKSPACE: the activation arena).")
      .value("WORKSPACE", MemoryPoolType::kWORKSPACE);
  nb::enum_<NetworkFlag>(m, "NetworkDefinitionCreationFlag", nb::is_arithmetic(),
                         "create_network flags, accepted as TensorRT's (kiln networks always have "
                         "explicit batch dims).")
      .value("EXPLICIT_BATCH", NetworkFlag::kEXPLICIT_BATCH)
      .value("STRONGLY_TYPED", NetworkFlag::kSTRONGLY_TYPED);

  nb::class_<OptimizationProfile>(
      m, "IOptimizationProfile",
      "The min/opt/max shapes of dynamic inputs (and values of shape inputs).")
      .def(
          "set_shape",
          [](OptimizationProfile& p, const std::string& name, nb::handle min, nb::handle opt,
             nb::handle max) {
            p.setDimensions(name, OptProfileSelector::kMIN, dimsOf(min, "min"));
            p.setDimensions(name, OptProfileSelector::kOPT, dimsOf(opt, "opt"));
            p.setDimensions(name, OptProfileSelector::kMAX, dimsOf(max, "max"));
          },
          nb::arg("input"), nb::arg("min"), nb::arg("opt"), nb::arg("max"),
          "Shapes input `input` will be run with (checked when the engine is built).")
      .def("get_shape", &profileShapes, nb::arg("input"),
           "[min, opt, max] of an input; empty tuples when not set.")
      .def(
          "set_shape_input",
          [](OptimizationProfile& p, const std::string& name, nb::handle min, nb::handle opt,
             nb::handle max) {
            p.setShapeValues(name, OptProfileSelector::kMIN, dimsOf(min, "min"));
            p.setShapeValues(name, OptProfileSelector::kOPT, dimsOf(opt, "opt"));
            p.setShapeValues(name, OptProfileSelector::kMAX, dimsOf(max, "max"));
          },
          nb::arg("input"), nb::arg("min"), nb::arg("opt"), nb::arg("max"),
          "Value ranges of a shape input.")
      .def(
          "get_shape_input",
          [](const OptimizationProfile& p, const std::string& name) {
            nb::list values;
            for (auto s :
                 {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX}) {
              values.append(dimsTuple(p.getShapeValues(name, s)));
            }
            return values;
          },
          nb::arg("input"))
      .def(
          "__bool__", [](const OptimizationProfile& p) { return !p.inputNames().empty(); },
          "True when some input has shapes set.");

  bindTrtCalibrator(m);
  nb::class_<BuilderConfig>(
      m, "IBuilderConfig", nb::dynamic_attr(),
      "Build options: flags, memory limit, threads, optimization profiles, INT8 calibrator.")
      .def_prop_rw(
          "int8_calibrator",
          [](nb::handle self) -> nb::object {
            return nb::hasattr(self, kCalibratorAttr) ? nb::object(self.attr(kCalibratorAttr))
                                                      : nb::none();
          },
          [](nb::handle self, nb::object calibrator) {
            if (!calibrator.is_none())
              PyCalibrator check(calibrator);  // refuses an object that is none
            nb::setattr(self, kCalibratorAttr, calibrator);
          },
          nb::arg("calibrator").none(),
          "The INT8 calibrator (a subclass of kiln.IInt8EntropyCalibrator2, IInt8MinMaxCalibrator "
          "or "
          "IInt8PercentileCalibrator) used with BuilderFlag.INT8; None for none.")
      .def(
          "set_flag", [](BuilderConfig& c, FlagIndex f) { c.setFlag(flagOf(f)); }, nb::arg("flag"))
      .def(
          "clear_flag", [](BuilderConfig& c, FlagIndex f) { c.clearFlag(flagOf(f)); },
          nb::arg("flag"))
      .def(
          "get_flag", [](const BuilderConfig& c, FlagIndex f) { return c.getFlag(flagOf(f)); },
          nb::arg("flag"))
      .def_prop_rw(
          "flags", [](const BuilderConfig& c) { return c.getFlags(); },
          [](BuilderConfig& c, uint32_t flags) {
            if (flags & ~kKnownFlags) {
              throw Error(ErrorCode::kInvalidArgument,
                          "flags " + std::to_string(flags) + " has bits of no kiln.BuilderFlag");
            }
            for (uint32_t bit = 0; bit < 3; ++bit) {
              BuilderFlag f = flagOf(static_cast<FlagIndex>(bit));
              if (flags & (1u << bit))
                c.setFlag(f);
              else
                c.clearFlag(f);
            }
          },
          "The flags as a bitmask: bit int(BuilderFlag.X) for each flag set.")
      .def(
          "set_memory_pool_limit",
          [](BuilderConfig& c, MemoryPoolType, uint64_t bytes) { c.setMemoryPoolLimit(bytes); },
          nb::arg("pool"), nb::arg("pool_size"),
          "Largest activation arena the engine may need at the profiles' max shapes.")
      .def(
          "get_memory_pool_limit",
          [](const BuilderConfig& c, MemoryPoolType) { return c.getMemoryPoolLimit(); },
          nb::arg("pool"))
      .def_prop_rw("max_workspace_size", &BuilderConfig::getMemoryPoolLimit,
                   &BuilderConfig::setMemoryPoolLimit,
                   "TensorRT 8's name for the WORKSPACE pool limit.")
      .def_prop_rw(
          "num_threads", &BuilderConfig::getThreads, &BuilderConfig::setThreads,
          "Intra-op threads of the engine's contexts; 0: one per hardware thread (kiln's own).")
      .def_prop_rw("builder_optimization_level", &BuilderConfig::getBuilderOptimizationLevel,
                   &BuilderConfig::setBuilderOptimizationLevel,
                   "0: heuristic kernel choices, no timing; 1..5 (default 3): time the candidate "
                   "kernels of conv, "
                   "GEMM and MatMul layers and keep the fastest (docs/cpp-api.md).")
      .def(
          "create_timing_cache",
          [](const BuilderConfig&, nb::bytes data) { return timingCacheFromBytes(data); },
          nb::arg("serialized_timing_cache"),
          "An ITimingCache from ITimingCache.serialize()'s bytes (b'' for an empty one).")
      .def(
          "set_timing_cache",
          [](nb::handle self, nb::handle cache, bool) {
            if (!cache.is_none())
              nb::cast<ITimingCache*>(cache);  // refuses what is not an ITimingCache
            nb::setattr(self, kTimingCacheAttr, cache);
            return true;
          },
          nb::arg("cache").none(), nb::arg("ignore_mismatch") = false,
          "Times of earlier builds to use, and to add this build's to; None: no cache.")
      .def("get_timing_cache",
           [](nb::handle self) -> nb::object {
             return nb::hasattr(self, kTimingCacheAttr) ? nb::object(self.attr(kTimingCacheAttr))
                                                        : nb::none();
           })
      .def("add_optimization_profile", &BuilderConfig::addOptimizationProfile, nb::arg("profile"),
           "Adds a copy of the profile; returns its index.")
      .def_prop_ro("num_optimization_profiles", &BuilderConfig::getNbOptimizationProfiles)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });

  nb::class_<PyBuilder>(m, "Builder",
                        "Builds engines (plans) from networks, as TensorRT's trt.Builder.")
      .def(
          "__init__",
          [](PyBuilder* self, nb::handle logger) {
            auto l = makeLogger(logger);
            new (self) PyBuilder{l, std::make_unique<Builder>(*l)};
          },
          nb::arg("logger"))
      .def(
          "create_network",
          [](PyBuilder& b, uint32_t flags) {
            return PyNetwork{b.logger, b.builder->createNetwork(), flags};
          },
          nb::arg("flags") = 0,
          "A new empty network. Every kiln network has explicit batch dims, so flags (TensorRT's "
          "1 << EXPLICIT_BATCH) are accepted and kept.")
      .def("create_builder_config", [](PyBuilder&) { return BuilderConfig(); })
      .def("create_optimization_profile", [](PyBuilder&) { return OptimizationProfile(); })
      .def(
          "build_serialized_network",
          [](PyBuilder& b, PyNetwork& network, nb::handle_t<BuilderConfig> config) {
            return HostMemory{buildPlan(b, network, config)};
          },
          nb::arg("network"), nb::arg("config"),
          "Optimizes the network, checks it over every profile and serializes the engine; raises "
          "(naming the "
          "layer, input or profile) when it cannot be built.")
      .def(
          "build_engine",
          [](PyBuilder& b, PyNetwork& network, nb::handle_t<BuilderConfig> config) {
            std::vector<uint8_t> plan = buildPlan(b, network, config);
            return deserializeEngine(b.logger, plan.data(), plan.size());
          },
          nb::arg("network"), nb::arg("config"),
          "TensorRT 8's build: build_serialized_network, then deserialized.")
      .def_prop_ro("platform_has_fast_fp16", [](const PyBuilder&) { return false; })
      .def_prop_ro("platform_has_fast_int8", [](const PyBuilder&) { return false; })
      .def_prop_rw(
          "max_batch_size", [](const PyBuilder&) { return 1; }, [](PyBuilder&, int) {},
          "TensorRT 7's implicit batch size: accepted and ignored (batch dims are explicit).")
      .def_prop_ro("logger", [](const PyBuilder& b) { return b.logger->object(); })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });
}

}  // namespace kiln::python
