// Runtime, ICudaEngine and IExecutionContext with TensorRT's Python names (and TensorRT 8's
// binding-index API), numpy buffers bound in place, and context.infer for dicts of arrays.
#include <Python.h>

#include <algorithm>
#include <map>
#include <mutex>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/engine.h"
#include "kiln/error.h"
#include "tensors.h"
#include "trt_common.h"

namespace kiln::python {

namespace {

struct PyEngine {
  std::shared_ptr<PyLogger> logger;
  std::shared_ptr<const Engine> engine;
  std::vector<uint8_t> plan;  // for serialize()
};

struct PyContext {
  nb::object engineObject;  // the kiln.ICudaEngine, kept alive
  const PyEngine* engine = nullptr;
  std::unique_ptr<ExecutionContext> context;
  std::map<std::string, nb::object> bound;  // arrays whose memory the context reads or writes
  std::mutex running;                       // a context runs on one thread at a time
};

const Engine& eng(const PyEngine& e) { return *e.engine; }

std::string tensorNames(const Engine& e) {
  std::string names;
  for (int i = 0; i < e.getNbIOTensors(); ++i)
    names += (i ? ", " : "") + ("'" + e.getIOTensorName(i) + "'");
  return names;
}

// The name of a tensor given by name, or by index (TensorRT 8's binding index); raises for an
// unknown one.
std::string tensorName(const Engine& e, nb::handle nameOrIndex) {
  if (PyLong_Check(nameOrIndex.ptr())) {
    const int index = nb::cast<int>(nameOrIndex);
    std::string name = index >= 0 ? e.getIOTensorName(index) : "";
    if (name.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "binding index " + std::to_string(index) + " is out of range; the engine has " +
                      std::to_string(e.getNbIOTensors()) + " tensors (" + tensorNames(e) + ")");
    }
    return name;
  }
  std::string name = nb::cast<std::string>(nameOrIndex);
  if (e.getTensorIOMode(name) == TensorIOMode::kNONE) {
    throw Error(ErrorCode::kInvalidArgument,
                "the engine has no tensor '" + name + "'; its tensors are " + tensorNames(e));
  }
  return name;
}

int bindingIndex(const Engine& e, const std::string& name) {
  for (int i = 0; i < e.getNbIOTensors(); ++i)
    if (e.getIOTensorName(i) == name) return i;
  return -1;
}

nb::object numpyType(DataType type) {
  return nb::module_::import_("kiln._trt_types").attr("nptype")(type);
}

nb::list profileShapes(const Engine& e, const std::string& name, int profile) {
  if (profile < 0 || profile >= e.getNbOptimizationProfiles()) {
    throw Error(ErrorCode::kInvalidArgument, "profile " + std::to_string(profile) +
                                                 " does not exist; the engine has " +
                                                 std::to_string(e.getNbOptimizationProfiles()));
  }
  nb::list shapes;
  for (auto s : {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX}) {
    Shape d = e.getProfileShape(name, profile, s);
    if (d.empty()) d = e.getTensorShape(name);  // a fixed input: its one shape
    shapes.append(dimsTuple(d));
  }
  return shapes;
}

// Binds a numpy array (in place) or a raw address to a tensor of the context.
void bindAddress(PyContext& c, const std::string& name, nb::handle value) {
  const Engine& e = eng(*c.engine);
  const bool output = e.getTensorIOMode(name) == TensorIOMode::kOUTPUT;
  if (PyLong_Check(value.ptr())) {
    c.bound.erase(name);
    check(c.context->setTensorAddress(name, reinterpret_cast<void*>(nb::cast<uintptr_t>(value))));
    return;
  }
  nb::module_ np = nb::module_::import_("numpy");
  if (!isInstance(value, np.attr("ndarray"))) {
    throw nb::type_error(("set_tensor_address('" + name +
                          "'): give a numpy array or an int address, not a " + typeName(value))
                             .c_str());
  }
  const auto given = nb::cast<std::string>(value.attr("dtype").attr("name"));
  const std::string expected = dataTypeName(e.getTensorDataType(name));
  if (given != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                "tensor '" + name + "' holds " + expected + ", the array given is " + given);
  }
  if (!nb::cast<bool>(value.attr("flags").attr("c_contiguous"))) {
    throw Error(ErrorCode::kInvalidArgument,
                "tensor '" + name +
                    "': the array must be C-contiguous to be used in place "
                    "(np.ascontiguousarray makes one)");
  }
  if (output && !nb::cast<bool>(value.attr("flags").attr("writeable"))) {
    throw Error(ErrorCode::kInvalidArgument, "output '" + name + "': the array is read-only");
  }
  // Its bytes, through a uint8 view (numpy refuses buffers of ml_dtypes types).
  nb::object bytes = value.attr("reshape")(-1).attr("view")(np.attr("uint8"));
  const auto address = nb::cast<uintptr_t>(bytes.attr("ctypes").attr("data"));
  const auto size = nb::cast<uint64_t>(bytes.attr("nbytes"));
  check(c.context->setTensorAddress(name, reinterpret_cast<void*>(address), size));
  c.bound[name] = nb::borrow(value);
}

void execute(PyContext& c) {
  Status s;
  {
    nb::gil_scoped_release release;  // Python custom ops take it back inside their nodes
    std::lock_guard<std::mutex> lock(c.running);
    s = c.context->execute();
  }
  check(s);
}

nb::dict infer(PyContext& c, nb::dict feed) {
  const Engine& e = eng(*c.engine);
  for (auto [key, value] : feed) {
    const std::string name = nb::cast<std::string>(key);
    if (e.getTensorIOMode(name) != TensorIOMode::kINPUT) {
      throw Error(
          ErrorCode::kInvalidArgument,
          "'" + name + "' is not an input of the engine; its tensors are " + tensorNames(e));
    }
    TensorInfo info;
    info.name = name;
    info.dtype = e.getTensorDataType(name);
    Tensor t = tensorFromPython(value, info);  // in place when C-contiguous
    if (t.dtype() != info.dtype) {
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + name + "' holds " + dataTypeName(info.dtype) +
                      ", the array given is " + dataTypeName(t.dtype()));
    }
    check(c.context->setInputTensor(name, t));
    c.bound.erase(name);  // the context holds the tensor now
  }
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string name = e.getIOTensorName(i);
    if (e.getTensorIOMode(name) == TensorIOMode::kINPUT && !feed.contains(name.c_str()) &&
        !e.hasDefaultValue(name)) {
      throw Error(ErrorCode::kInvalidArgument, "input '" + name + "' is missing from the feed");
    }
  }
  // Outputs whose shapes the inputs determine are computed straight into new numpy arrays.
  nb::dict results;
  std::vector<std::string> copied;
  nb::module_ np = nb::module_::import_("numpy");
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    const std::string name = e.getIOTensorName(i);
    if (e.getTensorIOMode(name) != TensorIOMode::kOUTPUT) continue;
    Result<Shape> shape = c.context->getTensorShape(name);
    check(shape.status());
    const bool known = std::all_of(shape->begin(), shape->end(), [](int64_t d) { return d >= 0; });
    if (!known || e.getTensorDataType(name) == DataType::kString) {
      copied.push_back(name);
      continue;
    }
    nb::object array = np.attr("empty")(dimsTuple(*shape), numpyType(e.getTensorDataType(name)));
    if (nb::cast<uint64_t>(array.attr("nbytes")) == 0) {
      copied.push_back(name);
      continue;
    }
    bindAddress(c, name, array);
    results[name.c_str()] = array;
  }
  execute(c);
  for (const std::string& name : copied) {
    Result<Tensor> t = c.context->getOutputTensor(name);
    check(t.status());
    results[name.c_str()] =
        tensorToPython(t->clone());  // the context's storage is reused by the next run
  }
  return results;
}

}  // namespace

nb::object deserializeEngine(const std::shared_ptr<PyLogger>& logger, const void* data,
                             size_t size) {
  auto engine = std::make_unique<PyEngine>();
  engine->logger = logger;
  engine->plan.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
  Result<std::shared_ptr<const Engine>> loaded = [&] {
    nb::gil_scoped_release release;
    return Runtime(*logger).deserializeEngine(engine->plan.data(), engine->plan.size());
  }();
  check(loaded.status());
  engine->engine = *loaded;
  return nb::cast(engine.release(), nb::rv_policy::take_ownership);
}

void bindTrtRuntime(nb::module_& m) {
  nb::enum_<TensorIOMode>(m, "TensorIOMode", nb::is_arithmetic(),
                          "Whether an engine tensor is an input or an output.")
      .value("NONE", TensorIOMode::kNONE)
      .value("INPUT", TensorIOMode::kINPUT)
      .value("OUTPUT", TensorIOMode::kOUTPUT);

  struct PyRuntime {
    std::shared_ptr<PyLogger> logger;
  };
  auto deserialize = [](const PyRuntime& r, nb::handle data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
    try {
      nb::object engine = deserializeEngine(r.logger, view.buf, static_cast<size_t>(view.len));
      PyBuffer_Release(&view);
      return engine;
    } catch (...) {
      PyBuffer_Release(&view);
      throw;
    }
  };
  nb::class_<PyRuntime>(m, "Runtime", "Loads serialized engines (plans).")
      .def(
          "__init__",
          [](PyRuntime* self, nb::handle logger) { new (self) PyRuntime{makeLogger(logger)}; },
          nb::arg("logger"))
      .def("deserialize_engine", deserialize, nb::arg("serialized_engine"),
           "The engine of a plan (bytes, kiln.IHostMemory or any buffer); raises kiln.Fail naming "
           "what is wrong "
           "with a truncated, corrupted or other-version plan, or a plugin it needs that is not "
           "registered.")
      .def("deserialize_cuda_engine", deserialize, nb::arg("serialized_engine"),
           "TensorRT's name for deserialize_engine.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });

  nb::class_<PyEngine>(m, "ICudaEngine", "A built engine (immutable; many contexts may share it).")
      .def_prop_ro("num_io_tensors", [](const PyEngine& e) { return eng(e).getNbIOTensors(); })
      .def(
          "get_tensor_name",
          [](const PyEngine& e, int i) { return tensorName(eng(e), nb::int_(i)); },
          nb::arg("index"), "Inputs first, then outputs.")
      .def(
          "get_tensor_mode",
          [](const PyEngine& e, const std::string& name) { return eng(e).getTensorIOMode(name); },
          nb::arg("name"), "TensorIOMode.INPUT / OUTPUT; NONE for a name the engine does not have.")
      .def(
          "get_tensor_shape",
          [](const PyEngine& e, const std::string& name) {
            return dimsTuple(eng(e).getTensorShape(tensorName(eng(e), nb::str(name.c_str()))));
          },
          nb::arg("name"), "-1 where a dim is dynamic.")
      .def(
          "get_tensor_dtype",
          [](const PyEngine& e, const std::string& name) {
            return eng(e).getTensorDataType(tensorName(eng(e), nb::str(name.c_str())));
          },
          nb::arg("name"))
      .def(
          "get_tensor_profile_shape",
          [](const PyEngine& e, const std::string& name, int profile) {
            return profileShapes(eng(e), tensorName(eng(e), nb::str(name.c_str())), profile);
          },
          nb::arg("name"), nb::arg("profile_index"), "[min, opt, max] of an input in a profile.")
      .def_prop_ro("num_optimization_profiles",
                   [](const PyEngine& e) { return eng(e).getNbOptimizationProfiles(); })
      .def_prop_ro("num_layers", [](const PyEngine& e) { return eng(e).getNbLayers(); })
      .def(
          "serialize", [](const PyEngine& e) { return nb::bytes(e.plan.data(), e.plan.size()); },
          "The plan the engine was loaded from.")
      .def(
          "create_execution_context",
          [](nb::handle self) {
            const PyEngine& e = nb::cast<const PyEngine&>(self);
            Result<std::unique_ptr<ExecutionContext>> context = eng(e).createExecutionContext();
            check(context.status());
            auto c = std::make_unique<PyContext>();
            c->engineObject = nb::borrow(self);
            c->engine = &e;
            c->context = std::move(*context);
            return c.release();
          },
          nb::rv_policy::take_ownership)
      // TensorRT 8's binding API: bindings are the I/O tensors, by index.
      .def_prop_ro("num_bindings", [](const PyEngine& e) { return eng(e).getNbIOTensors(); })
      .def(
          "binding_is_input",
          [](const PyEngine& e, nb::handle b) {
            return eng(e).getTensorIOMode(tensorName(eng(e), b)) == TensorIOMode::kINPUT;
          },
          nb::arg("binding"))
      .def(
          "get_binding_index",
          [](const PyEngine& e, const std::string& name) { return bindingIndex(eng(e), name); },
          nb::arg("name"), "-1 for a name the engine does not have.")
      .def(
          "get_binding_name",
          [](const PyEngine& e, int i) { return tensorName(eng(e), nb::int_(i)); },
          nb::arg("index"))
      .def(
          "get_binding_shape",
          [](const PyEngine& e, nb::handle b) {
            return dimsTuple(eng(e).getTensorShape(tensorName(eng(e), b)));
          },
          nb::arg("binding"))
      .def(
          "get_binding_dtype",
          [](const PyEngine& e, nb::handle b) {
            return eng(e).getTensorDataType(tensorName(eng(e), b));
          },
          nb::arg("binding"))
      .def(
          "get_profile_shape",
          [](const PyEngine& e, int profile, nb::handle b) {
            return profileShapes(eng(e), tensorName(eng(e), b), profile);
          },
          nb::arg("profile_index"), nb::arg("binding"))
      .def_prop_ro("has_implicit_batch_dimension", [](const PyEngine&) { return false; })
      .def_prop_ro("max_batch_size", [](const PyEngine&) { return 1; })
      .def("__len__", [](const PyEngine& e) { return eng(e).getNbIOTensors(); })
      .def(
          "__getitem__",
          [](const PyEngine& e, nb::handle key) -> nb::object {
            if (PyLong_Check(key.ptr())) return nb::str(tensorName(eng(e), key).c_str());
            return nb::int_(bindingIndex(eng(e), tensorName(eng(e), key)));
          },
          "engine[i] is tensor i's name, engine[name] its index.")
      .def("__iter__",
           [](const PyEngine& e) {
             nb::list names;
             for (int i = 0; i < eng(e).getNbIOTensors(); ++i)
               names.append(eng(e).getIOTensorName(i));
             return names.attr("__iter__")();
           })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });

  nb::class_<PyContext>(m, "IExecutionContext", "Runs an engine: shapes, bound buffers, execute.")
      .def_prop_ro("engine", [](const PyContext& c) { return c.engineObject; })
      .def(
          "set_input_shape",
          [](PyContext& c, const std::string& name, nb::handle shape) {
            check(c.context->setInputShape(tensorName(eng(*c.engine), nb::str(name.c_str())),
                                           dimsOf(shape, "shape")));
            return true;
          },
          nb::arg("name"), nb::arg("shape"),
          "Sets a dynamic input's shape; raises InvalidArgument (naming the input, dim and profile "
          "range) when it "
          "is outside the profile.")
      .def(
          "get_tensor_shape",
          [](const PyContext& c, const std::string& name) {
            Result<Shape> d =
                c.context->getTensorShape(tensorName(eng(*c.engine), nb::str(name.c_str())));
            check(d.status());
            return dimsTuple(*d);
          },
          nb::arg("name"), "An input's shape, or an output's resolved from the input shapes.")
      .def(
          "set_tensor_address",
          [](PyContext& c, const std::string& name, nb::handle value) {
            bindAddress(c, tensorName(eng(*c.engine), nb::str(name.c_str())), value);
            return true;
          },
          nb::arg("name"), nb::arg("memory"),
          "Binds a C-contiguous numpy array (read or written in place; kept alive while bound) or "
          "an int address.")
      .def(
          "execute_v2",
          [](PyContext& c, nb::handle bindings) {
            const Engine& e = eng(*c.engine);
            const int count = static_cast<int>(nb::len(bindings));
            if (count != e.getNbIOTensors()) {
              throw Error(ErrorCode::kInvalidArgument, "execute_v2: " + std::to_string(count) +
                                                           " bindings given, the engine has " +
                                                           std::to_string(e.getNbIOTensors()) +
                                                           " (" + tensorNames(e) + ")");
            }
            int i = 0;
            for (nb::handle b : bindings) bindAddress(c, e.getIOTensorName(i++), b);
            execute(c);
            return true;
          },
          nb::arg("bindings"), "Binds one address or array per tensor (binding order) and runs.")
      .def(
          "execute_async_v3",
          [](PyContext& c, uintptr_t) {
            execute(c);
            return true;
          },
          nb::arg("stream_handle") = 0,
          "Runs with the bound buffers; returns when done (CPU: no streams).")
      .def(
          "execute_async_v2",
          [](PyContext& c, nb::handle bindings, uintptr_t) {
            const Engine& e = eng(*c.engine);
            int i = 0;
            for (nb::handle b : bindings) bindAddress(c, tensorName(e, nb::int_(i++)), b);
            execute(c);
            return true;
          },
          nb::arg("bindings"), nb::arg("stream_handle") = 0)
      .def("infer", &infer, nb::arg("feed"),
           "Runs on a dict of arrays (shapes taken from them) and returns a dict of every output.")
      .def(
          "set_binding_shape",
          [](PyContext& c, int index, nb::handle shape) {
            check(c.context->setInputShape(tensorName(eng(*c.engine), nb::int_(index)),
                                           dimsOf(shape, "shape")));
            return true;
          },
          nb::arg("binding"), nb::arg("shape"))
      .def(
          "get_binding_shape",
          [](const PyContext& c, int index) {
            Result<Shape> d =
                c.context->getTensorShape(tensorName(eng(*c.engine), nb::int_(index)));
            check(d.status());
            return dimsTuple(*d);
          },
          nb::arg("binding"))
      .def_prop_ro("all_binding_shapes_specified",
                   [](const PyContext& c) {
                     const Engine& e = eng(*c.engine);
                     for (int i = 0; i < e.getNbIOTensors(); ++i) {
                       Result<Shape> d = c.context->getTensorShape(e.getIOTensorName(i));
                       if (!d.ok()) return false;
                       for (int64_t v : *d)
                         if (v < 0) return false;
                     }
                     return true;
                   })
      .def_prop_rw(
          "active_optimization_profile",
          [](const PyContext& c) { return c.context->getOptimizationProfile(); },
          [](PyContext& c, int index) { check(c.context->setOptimizationProfile(index)); })
      .def(
          "set_optimization_profile_async",
          [](PyContext& c, int index, uintptr_t) {
            check(c.context->setOptimizationProfile(index));
            return true;
          },
          nb::arg("profile_index"), nb::arg("stream_handle") = 0)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](nb::handle, nb::args) { return false; });
}

}  // namespace kiln::python
