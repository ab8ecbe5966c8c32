// Plugin fields <-> Python values: for create_plugin's field collections and for the keyword
// arguments a Python custom op receives.
#pragma once
#include <optional>
#include <string>

#include "bindings.h"
#include "kiln/plugin.h"

namespace kiln::python {

/// The field value of a Python value: int (bool) -> INT, float -> FLOAT, str/bytes -> STRING,
/// a list/tuple/1-D array -> INTS, FLOATS or STRINGS, an array of rank > 1 -> TENSOR. `expected`
/// (the creator's field type, when it lists one) settles a one-element array as a scalar or a
/// list, and an array as a TENSOR. Raises TypeError naming the field for anything else.
PluginFieldValue fieldFromPython(const std::string& name, nb::handle value,
                                 std::optional<PluginFieldType> expected);

/// The fields as keyword arguments: ints, floats, strs, lists of them, numpy arrays for tensors.
nb::dict fieldsToPython(const PluginFields& fields);

}  // namespace kiln::python
