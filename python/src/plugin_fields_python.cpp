#include "plugin_fields_python.h"

#include <Python.h>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "tensors.h"
#include "trt_common.h"

namespace kiln::python {

namespace {

[[noreturn]] void badField(const std::string& name, nb::handle value, const char* why) {
  throw nb::type_error(
      ("plugin field '" + name + "': " + why + " (got a " + typeName(value) + ")").c_str());
}

bool isListType(PluginFieldType t) {
  return t == PluginFieldType::kINTS || t == PluginFieldType::kFLOATS ||
         t == PluginFieldType::kSTRINGS;
}

PluginFieldValue scalarField(const std::string& name, nb::handle v) {
  if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr())) return nb::cast<int64_t>(v);
  if (PyFloat_Check(v.ptr())) return nb::cast<float>(v);
  if (PyUnicode_Check(v.ptr())) return nb::cast<std::string>(v);
  if (PyBytes_Check(v.ptr()))
    return std::string(PyBytes_AS_STRING(v.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(v.ptr())));
  badField(name, v, "needs an int, float, str, a list of them or a numpy array");
}

PluginFieldValue listField(const std::string& name, nb::handle list) {
  bool anyFloat = false, anyString = false, anyNumber = false;
  for (nb::handle item : list) {
    if (PyUnicode_Check(item.ptr()) || PyBytes_Check(item.ptr()))
      anyString = true;
    else if (PyFloat_Check(item.ptr()))
      anyFloat = anyNumber = true;
    else if (PyLong_Check(item.ptr()))
      anyNumber = true;
    else
      badField(name, item, "list members must be ints, floats or strs");
  }
  if (anyString && anyNumber) badField(name, list, "a list mixes strs and numbers");
  if (anyString) {
    std::vector<std::string> values;
    for (nb::handle item : list) values.push_back(std::get<std::string>(scalarField(name, item)));
    return values;
  }
  if (anyFloat) {
    std::vector<float> values;
    for (nb::handle item : list) values.push_back(nb::cast<float>(item));
    return values;
  }
  std::vector<int64_t> values;
  for (nb::handle item : list) values.push_back(nb::cast<int64_t>(item));
  return values;
}

}  // namespace

PluginFieldValue fieldFromPython(const std::string& name, nb::handle value,
                                 std::optional<PluginFieldType> expected) {
  nb::module_ np = nb::module_::import_("numpy");
  if (isInstance(value, np.attr("ndarray"))) {
    const auto ndim = nb::cast<int>(value.attr("ndim"));
    const auto size = nb::cast<int64_t>(value.attr("size"));
    if (expected == PluginFieldType::kTENSOR || (!expected && ndim > 1)) {
      TensorInfo info;
      info.name = name;
      return tensorFromPython(np.attr("ascontiguousarray")(value), info).clone();
    }
    const auto kind = nb::cast<std::string>(value.attr("dtype").attr("kind"));
    if (kind == "S" || kind == "U") {  // TensorRT's CHAR fields: the string, as bytes or str
      nb::object item = value.attr("tobytes")();
      if (kind == "U") item = value.attr("item")();
      return std::get<std::string>(scalarField(name, item));
    }
    nb::object items = value.attr("ravel")().attr("tolist")();
    const bool asScalar = expected ? !isListType(*expected) && size == 1 : (ndim == 0 || size == 1);
    if (asScalar) return scalarField(name, items[0]);
    return listField(name, items);
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    if (expected && !isListType(*expected) && nb::len(value) == 1)
      return scalarField(name, value[0]);
    return listField(name, value);
  }
  if (isInstance(value, np.attr("generic"))) value = value.attr("item")();
  PluginFieldValue scalar = scalarField(name, value);
  if (expected && isListType(*expected)) return listField(name, nb::make_tuple(value));
  return scalar;
}

nb::dict fieldsToPython(const PluginFields& fields) {
  nb::dict kwargs;
  for (const auto& [name, value] : fields.all()) {
    if (name == "plugin_version") continue;  // selects the version; not an argument of the op
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, Tensor>) {
            kwargs[name.c_str()] = tensorToPython(v.clone());
          } else {
            kwargs[name.c_str()] = nb::cast(v);
          }
        },
        value);
  }
  return kwargs;
}

}  // namespace kiln::python
