// Custom ops written in Python (kiln.custom_op): a plugin creator in kiln's registry whose
// plugins call a numpy function. ONNX nodes of the op's (domain, name) reach it through the
// plugin fallback, networks through add_plugin_v2, and plans re-create it by name, so a plan
// that holds one needs the same registration before it loads. The engine runs with the GIL
// released; a node of such an op takes it for the call only.
#include <Python.h>

#include <mutex>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/error.h"
#include "plugin_fields_python.h"
#include "tensors.h"
#include "trt_common.h"
#include "trt_plugin_handle.h"

namespace kiln::python {

using namespace nb::literals;

namespace {

// What a registration holds: the Python functions and the op's outputs. Shared by the creator
// and every plugin (clones included); its references go back to Python with the GIL.
struct PyOpState {
  std::string domain, name, version;
  nb::object compute;
  nb::object shape;                   // None: every output has the shape of input 0
  std::vector<DataType> outputTypes;  // empty: every output has the type of input 0
  int numOutputs = 1;

  std::string label() const {
    return "Python custom op '" + (domain.empty() ? "" : domain + "::") + name + "'";
  }
  PyOpState() = default;
  PyOpState(const PyOpState&) = delete;
  PyOpState& operator=(const PyOpState&) = delete;
  ~PyOpState() {
    releaseAtExit(compute);
    releaseAtExit(shape);
  }
};

// The Python exception being handled, as "TypeName: message".
std::string describe(const nb::python_error& e) {
  return std::string(reinterpret_cast<PyTypeObject*>(e.type().ptr())->tp_name) + ": " +
         nb::str(e.value()).c_str();
}

class PyOpPlugin : public IPlugin {
 public:
  PyOpPlugin(std::shared_ptr<const PyOpState> state, PluginFields fields)
      : state_(std::move(state)), fields_(std::move(fields)) {}

  std::string getPluginName() const override { return state_->name; }
  std::string getPluginVersion() const override { return state_->version; }
  std::string getPluginNamespace() const override { return state_->domain; }
  int getNbOutputs() const override { return state_->numOutputs; }

  std::vector<DimExpr> getOutputDimensions(int outputIndex,
                                           const std::vector<ShapeExpr>& inputs) const override {
    if (!interpreterAlive())
      throw Error(ErrorCode::kRuntimeError,
                  state_->label() + ": the Python interpreter has shut down");
    nb::gil_scoped_acquire gil;
    if (!state_->compute.is_valid()) {
      throw Error(ErrorCode::kRuntimeError,
                  state_->label() + ": the Python interpreter is shutting down");
    }
    if (!state_->shape.is_valid() || state_->shape.is_none()) {
      if (inputs.empty())
        throw Error(ErrorCode::kInvalidArgument,
                    state_->label() + " has no inputs: give it a shape function");
      return inputs[0];
    }
    try {
      nb::list args;
      for (const ShapeExpr& shape : inputs) {
        nb::list dims;
        for (const DimExpr& d : shape) dims.append(nb::cast(d));
        args.append(nb::tuple(dims));
      }
      nb::object result = state_->shape(*args, **fieldsToPython(fields_));
      // One shape per output; a single output's shape may be returned as it is.
      nb::object shapes = result;
      if (state_->numOutputs == 1 && nb::len(result) > 0 &&
          !PySequence_Check(nb::object(result[0]).ptr())) {
        shapes = nb::make_tuple(result);
      }
      if (static_cast<int>(nb::len(shapes)) != state_->numOutputs) {
        throw Error(ErrorCode::kInvalidArgument,
                    state_->label() + ": the shape function returned " +
                        std::to_string(nb::len(shapes)) + " shapes for " +
                        std::to_string(state_->numOutputs) + " outputs");
      }
      std::vector<DimExpr> dims;
      for (nb::handle d : nb::object(shapes[outputIndex])) dims.push_back(nb::cast<DimExpr>(d));
      return dims;
    } catch (nb::python_error& e) {
      throw Error(ErrorCode::kInvalidArgument,
                  state_->label() + ": the shape function raised " + describe(e));
    } catch (const nb::cast_error&) {
      throw Error(
          ErrorCode::kInvalidArgument,
          state_->label() + ": the shape function must return shapes of ints and kiln.DimExpr");
    }
  }

  DataType getOutputDataType(int outputIndex,
                             const std::vector<DataType>& inputTypes) const override {
    if (!state_->outputTypes.empty())
      return state_->outputTypes.at(static_cast<size_t>(outputIndex));
    return inputTypes.empty() ? DataType::kFloat32 : inputTypes[0];
  }

  bool supportsFormatCombination(int pos, const std::vector<PluginTensorFormat>& inOut,
                                 int) const override {
    const DataType t = inOut.at(static_cast<size_t>(pos)).type;
    return t != DataType::kString && t != DataType::kUndefined;  // numpy takes any numeric type
  }

  Status enqueue(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                 void*) override {
    if (!interpreterAlive())
      return Status(ErrorCode::kRuntimeError,
                    state_->label() + ": the Python interpreter has shut down");
    nb::gil_scoped_acquire gil;
    if (!state_->compute.is_valid()) {
      return Status(ErrorCode::kRuntimeError,
                    state_->label() + ": the Python interpreter is shutting down");
    }
    try {
      nb::list args;
      for (const Tensor* t : inputs) {
        if (!t) {
          args.append(nb::none());
          continue;
        }
        // A read-only view of the engine's memory, valid during the call.
        nb::object array = tensorToPython(*t);
        array.attr("flags").attr("writeable") = false;
        args.append(array);
      }
      nb::object result = state_->compute(*args, **fieldsToPython(fields_));
      std::vector<nb::object> results;
      if (state_->numOutputs == 1 && !PyTuple_Check(result.ptr()) && !PyList_Check(result.ptr())) {
        results.push_back(result);
      } else {
        for (nb::handle r : result) results.push_back(nb::borrow(r));
      }
      if (results.size() != outputs.size()) {
        return Status(ErrorCode::kRuntimeError,
                      state_->label() + " returned " + std::to_string(results.size()) +
                          " outputs, it has " + std::to_string(outputs.size()));
      }
      nb::module_ np = nb::module_::import_("numpy");
      for (size_t i = 0; i < outputs.size(); ++i) {
        nb::object value = np.attr("asarray")(results[i]);
        Shape got;
        for (nb::handle d : value.attr("shape")) got.push_back(nb::cast<int64_t>(d));
        if (got != outputs[i]->shape()) {
          return Status(ErrorCode::kRuntimeError,
                        state_->label() + " returned output " + std::to_string(i) + " of shape " +
                            shapeToString(got) + "; its shape function gives " +
                            shapeToString(outputs[i]->shape()));
        }
        np.attr("copyto")(tensorToPython(*outputs[i]), value, "casting"_a = "same_kind");
      }
      return Status();
    } catch (nb::python_error& e) {
      return Status(ErrorCode::kRuntimeError, state_->label() + " raised " + describe(e));
    } catch (const std::exception& e) {
      return Status(ErrorCode::kRuntimeError, state_->label() + ": " + e.what());
    }
  }

  std::vector<uint8_t> serialize() const override { return fields_.serialize(); }
  std::unique_ptr<IPlugin> clone() const override {
    return std::make_unique<PyOpPlugin>(state_, fields_);
  }

 private:
  std::shared_ptr<const PyOpState> state_;
  PluginFields fields_;
};

class PyOpCreator : public IPluginCreator {
 public:
  explicit PyOpCreator(std::shared_ptr<const PyOpState> state) : state_(std::move(state)) {}
  std::string getPluginName() const override { return state_->name; }
  std::string getPluginVersion() const override { return state_->version; }
  std::string getPluginNamespace() const override { return state_->domain; }
  std::unique_ptr<IPlugin> createPlugin(const std::string&,
                                        const PluginFields& fields) const override {
    return std::make_unique<PyOpPlugin>(state_, fields);
  }
  std::unique_ptr<IPlugin> deserializePlugin(const std::string&, const void* data,
                                             size_t size) const override {
    return std::make_unique<PyOpPlugin>(state_, PluginFields::deserialize(data, size));
  }

 private:
  std::shared_ptr<const PyOpState> state_;
};

// The ops registered from Python, so that they leave the registry before the interpreter does,
// and every op state made, so that at exit the functions are released even where an engine still
// holds the op (the function's globals may hold that engine: a cycle Python's GC cannot see).
std::mutex registeredMutex;
std::vector<std::shared_ptr<const PyOpState>> registered;
std::vector<std::weak_ptr<PyOpState>> allStates;

void deregister(const std::string& domain, const std::string& name, const std::string& version) {
  PluginRegistry::global().deregisterCreator(name, version, domain);
  std::lock_guard<std::mutex> lock(registeredMutex);
  std::erase_if(registered, [&](const auto& s) {
    return s->domain == domain && s->name == name && s->version == version;
  });
}

}  // namespace

void bindCustomOps(nb::module_& m) {
  m.def(
      "_register_custom_op",
      [](const std::string& domain, const std::string& name, const std::string& version,
         nb::object compute, nb::object shape, int numOutputs,
         const std::vector<DataType>& outputTypes) {
        if (numOutputs < 1) throw nb::value_error("num_outputs must be at least 1");
        if (!outputTypes.empty() && static_cast<int>(outputTypes.size()) != numOutputs) {
          throw nb::value_error("dtypes needs one type per output");
        }
        auto state = std::make_shared<PyOpState>();
        state->domain = domain;
        state->name = name;
        state->version = version;
        state->compute = std::move(compute);
        state->shape = std::move(shape);
        state->numOutputs = numOutputs;
        state->outputTypes = outputTypes;
        check(PluginRegistry::global().registerCreator(std::make_shared<PyOpCreator>(state)));
        std::lock_guard<std::mutex> lock(registeredMutex);
        allStates.push_back(state);
        registered.push_back(std::move(state));
      },
      nb::arg("domain"), nb::arg("name"), nb::arg("version"), nb::arg("compute"),
      nb::arg("shape").none(), nb::arg("num_outputs"), nb::arg("dtypes"),
      "Used by kiln.custom_op.");
  m.def("_deregister_custom_op", &deregister, nb::arg("domain"), nb::arg("name"),
        nb::arg("version"), "Used by CustomOp.unregister.");
  m.def(
      "_release_custom_ops_at_exit",
      [] {
        std::vector<std::shared_ptr<const PyOpState>> all;
        std::vector<std::shared_ptr<PyOpState>> alive;
        {
          std::lock_guard<std::mutex> lock(registeredMutex);
          all = registered;
          for (auto& weak : allStates)
            if (auto state = weak.lock()) alive.push_back(std::move(state));
        }
        for (const auto& s : all) deregister(s->domain, s->name, s->version);
        for (const auto& s : alive) {  // with the GIL held: this runs from atexit
          s->compute.reset();
          s->shape.reset();
        }
      },
      "Run at exit: the registry outlives the interpreter; ops still held by engines stop "
      "working.");
  m.def(
      "_create_custom_op_plugin",
      [](const std::string& domain, const std::string& name, const std::string& version,
         nb::dict attrs) {
        auto creator = PluginRegistry::global().getCreator(name, version, domain);
        if (!creator)
          throw Error(ErrorCode::kInvalidArgument,
                      "custom op '" + domain + "::" + name + "' is not registered");
        PluginFields fields;
        for (auto [k, v] : attrs) {
          const std::string key = nb::cast<std::string>(k);
          fields.set(key, fieldFromPython(key, v, std::nullopt));
        }
        return PluginHandle{std::shared_ptr<const IPlugin>(creator->createPlugin(name, fields)),
                            name};
      },
      nb::arg("domain"), nb::arg("name"), nb::arg("version"), nb::arg("attrs"),
      "Used by CustomOp.create_plugin.");
}

}  // namespace kiln::python
