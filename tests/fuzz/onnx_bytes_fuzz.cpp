// Fuzz target: an ONNX model file as raw bytes, through the loader (protobuf parse, external data,
// Constant nodes, topological sort, verification) and shape inference, as `kiln inspect` runs them.
#include "onnx_model_checks.h"
