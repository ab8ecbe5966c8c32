"""onnxruntime.capi's place in kiln: the modules packages import from it."""
