// The plugin registry from Python (TensorRT's get_plugin_registry(), creators, create_plugin with
// fields) and DimExpr, the dims algebra of custom-op shape functions.
#include <Python.h>

#include <nanobind/operators.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/error.h"
#include "plugin/plugin_node.h"
#include "plugin_fields_python.h"
#include "trt_common.h"
#include "trt_plugin_handle.h"

namespace kiln::python {

namespace {

struct PyCreator {
  std::shared_ptr<IPluginCreator> creator;
};

// The fields of a PluginFieldCollection (PluginField objects with .name and .data) or a dict.
PluginFields fieldsOfCollection(const IPluginCreator& creator, nb::handle collection) {
  std::vector<std::pair<std::string, nb::object>> items;
  if (PyDict_Check(collection.ptr())) {
    for (auto [k, v] : nb::borrow<nb::dict>(collection))
      items.emplace_back(nb::cast<std::string>(k), nb::borrow(v));
  } else if (!collection.is_none()) {
    for (nb::handle f : collection)
      items.emplace_back(nb::cast<std::string>(f.attr("name")), f.attr("data"));
  }
  std::map<std::string, PluginFieldType> specs;
  for (const PluginFieldSpec& s : creator.getFieldNames()) specs[s.name] = s.type;
  PluginFields fields;
  for (auto& [name, value] : items) {
    auto it = specs.find(name);
    fields.set(name, fieldFromPython(name, value,
                                     it == specs.end() ? std::nullopt : std::optional(it->second)));
  }
  return fields;
}

PluginHandle createPluginFrom(const IPluginCreator& creator, const std::string& name,
                              nb::handle collection) {
  PluginFields fields = fieldsOfCollection(creator, collection);
  const std::string label = "plugin '" + name + "' (" + creator.getPluginName() + ")";
  return PluginHandle{plugin::createPlugin(creator, name, label, fields), name};
}

void bindDimExpr(nb::module_& m) {
  nb::class_<DimExpr>(
      m, "DimExpr",
      "A dim as an expression of input dims, for custom-op shape functions: combine with + - * // "
      "and ints, kiln.DimExpr.max / min / ceil_div.")
      .def(nb::init<int64_t>(), nb::arg("value"))
      .def(nb::self + nb::self)
      .def(nb::self - nb::self)
      .def(nb::self * nb::self)
      .def("__floordiv__", [](const DimExpr& a, const DimExpr& b) { return a / b; })
      .def("__radd__", [](const DimExpr& a, int64_t b) { return DimExpr(b) + a; })
      .def("__rsub__", [](const DimExpr& a, int64_t b) { return DimExpr(b) - a; })
      .def("__rmul__", [](const DimExpr& a, int64_t b) { return DimExpr(b) * a; })
      .def("__rfloordiv__", [](const DimExpr& a, int64_t b) { return DimExpr(b) / a; })
      .def_static("max", [](const DimExpr& a, const DimExpr& b) { return max(a, b); })
      .def_static("min", [](const DimExpr& a, const DimExpr& b) { return min(a, b); })
      .def_static("ceil_div", [](const DimExpr& a, const DimExpr& b) { return ceilDiv(a, b); })
      .def_prop_ro(
          "constant",
          [](const DimExpr& d) -> nb::object {
            if (d.kind() == DimExpr::Kind::kCONSTANT) return nb::int_(d.value());
            return nb::none();
          },
          "The value of a constant expression, None otherwise.")
      .def("__repr__", &DimExpr::toString);
  nb::implicitly_convertible<int64_t, DimExpr>();
}

}  // namespace

void bindTrtPlugins(nb::module_& m) {
  bindDimExpr(m);
  nb::enum_<PluginFieldType>(m, "PluginFieldType", nb::is_arithmetic(),
                             "Types of plugin fields (kiln's: ints, floats, strings, tensors).")
      .value("INT", PluginFieldType::kINT)
      .value("FLOAT", PluginFieldType::kFLOAT)
      .value("STRING", PluginFieldType::kSTRING)
      .value("INTS", PluginFieldType::kINTS)
      .value("FLOATS", PluginFieldType::kFLOATS)
      .value("STRINGS", PluginFieldType::kSTRINGS)
      .value("TENSOR", PluginFieldType::kTENSOR);

  nb::class_<PluginFieldSpec>(m, "PluginFieldSpec", "A field a creator accepts.")
      .def_ro("name", &PluginFieldSpec::name)
      .def_ro("type", &PluginFieldSpec::type)
      .def_ro("required", &PluginFieldSpec::required)
      .def("__repr__", [](const PluginFieldSpec& s) {
        return "<kiln.PluginFieldSpec '" + s.name + "' " + pluginFieldTypeName(s.type) +
               (s.required ? " required>" : ">");
      });

  nb::class_<PluginHandle>(m, "IPluginV2",
                           "A plugin made by a creator; add it with network.add_plugin_v2.")
      .def_prop_ro("plugin_type", [](const PluginHandle& p) { return p.plugin->getPluginName(); })
      .def_prop_ro("plugin_version",
                   [](const PluginHandle& p) { return p.plugin->getPluginVersion(); })
      .def_prop_ro("plugin_namespace",
                   [](const PluginHandle& p) { return p.plugin->getPluginNamespace(); })
      .def_prop_ro("num_outputs", [](const PluginHandle& p) { return p.plugin->getNbOutputs(); })
      .def_ro("name", &PluginHandle::name);

  nb::class_<PyCreator>(m, "IPluginCreator", "A registered plugin creator.")
      .def_prop_ro("name", [](const PyCreator& c) { return c.creator->getPluginName(); })
      .def_prop_ro("plugin_version",
                   [](const PyCreator& c) { return c.creator->getPluginVersion(); })
      .def_prop_ro("plugin_namespace",
                   [](const PyCreator& c) { return c.creator->getPluginNamespace(); })
      .def_prop_ro(
          "field_names", [](const PyCreator& c) { return c.creator->getFieldNames(); },
          "The fields it accepts (empty: any).")
      .def(
          "create_plugin",
          [](const PyCreator& c, const std::string& name, nb::handle fields) {
            return createPluginFrom(*c.creator, name, fields);
          },
          nb::arg("name"), nb::arg("field_collection").none() = nb::none(),
          "A plugin from fields (a kiln.PluginFieldCollection or a dict name -> value), checked "
          "against field_names.")
      .def("__repr__", [](const PyCreator& c) {
        return "<kiln.IPluginCreator '" + c.creator->getPluginName() + "' version '" +
               c.creator->getPluginVersion() + "' namespace '" + c.creator->getPluginNamespace() +
               "'>";
      });

  struct PyRegistry {};
  nb::class_<PyRegistry>(m, "IPluginRegistry", "kiln's process-wide plugin registry.")
      .def_prop_ro("plugin_creator_list",
                   [](const PyRegistry&) {
                     std::vector<PyCreator> creators;
                     for (auto& c : PluginRegistry::global().getAllCreators())
                       creators.push_back(PyCreator{c});
                     return creators;
                   })
      .def(
          "get_plugin_creator",
          [](const PyRegistry&, const std::string& name, const std::string& version,
             const std::string& pluginNamespace) -> nb::object {
            auto c = PluginRegistry::global().getCreator(name, version, pluginNamespace);
            if (!c) return nb::none();
            return nb::cast(PyCreator{c});
          },
          nb::arg("type"), nb::arg("version") = "", nb::arg("plugin_namespace") = "",
          "The creator of (type, version, namespace); an empty version picks the highest; None if "
          "there is none.")
      .def_prop_ro("loaded_libraries",
                   [](const PyRegistry&) { return PluginRegistry::global().getLoadedLibraries(); });
  m.def(
      "get_plugin_registry", [] { return PyRegistry{}; },
      "The plugin registry (C++ plugins, libraries, custom ops).");
}

}  // namespace kiln::python
