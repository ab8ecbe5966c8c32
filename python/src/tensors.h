// Conversions between Python values (numpy arrays, lists, None) and kiln Tensors.
#pragma once
#include <string>

#include "bindings.h"
#include "kiln/session.h"

namespace kiln::python {

/// The tensor fed to input `info` for `value`, by ONNX Runtime's rules: a numpy array of any dtype
/// kiln holds (str/bytes/object arrays for strings, ml_dtypes arrays for bfloat16 and float8), a
/// list converted to the input's dtype, a list of arrays for a sequence, None for an absent
/// optional. A C-contiguous, aligned array is viewed in place (the tensor keeps it alive); any
/// other array is copied. Raises RuntimeError, as ONNX Runtime does, for other objects.
Tensor tensorFromPython(nb::handle value, const TensorInfo& info);

/// The Python value of an output: a numpy array viewing the tensor's storage (no copy; strings
/// become an object array of str), a list for a sequence, None for an absent optional.
nb::object tensorToPython(const Tensor& tensor);

/// ONNX Runtime's spelling of a value's type: "tensor(float)", "seq(tensor(int64))",
/// "optional(tensor(double))".
std::string ortTypeName(const TensorInfo& info);

}  // namespace kiln::python
