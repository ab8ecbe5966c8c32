#pragma once
// KILN_INTERNAL_API exports an internal class or function from libkiln_runtime / libkiln_onnx
// because something outside its library uses it: libkiln_onnx (the builder and importer over
// the runtime), the kiln CLI, the Python module kiln._kiln, the unit tests, the fuzz targets and
// the test plugins. It is not part of the public API (include/kiln, KILN_API) and has no stable
// ABI. Everything else is hidden (-fvisibility=hidden); a new use across a library boundary fails
// to link until its declaration carries this macro.
#define KILN_INTERNAL_API [[gnu::visibility("default")]]
