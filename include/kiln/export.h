#pragma once
// KILN_API marks what libkiln_runtime and libkiln_onnx export: the public API in include/kiln.
// Both libraries compile with -fvisibility=hidden, so anything without it stays inside its library.
#define KILN_API [[gnu::visibility("default")]]
