"""kiln: a CPU inference engine for ONNX models, with onnxruntime's Python API.

    import kiln
    session = kiln.InferenceSession("model.onnx")
    outputs = session.run(None, {"input": array})

`import kiln as onnxruntime`, or `sys.modules["onnxruntime"] = kiln` before a package imports
onnxruntime, runs programs written for onnxruntime on kiln (docs/python.md lists the differences).
"""

from kiln import _kiln
from kiln._io_binding import IOBinding, OrtValue
from kiln._kiln import (
    EngineError,
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoaded,
    NoModel,
    NoSuchFile,
    NotImplemented,
    RuntimeException,
    load_plugin_library,
)
from kiln._options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from kiln._providers import (
    disable_telemetry_events,
    enable_telemetry_events,
    get_all_providers,
    get_available_providers,
    get_device,
    get_version_string,
    set_default_logger_severity,
    set_default_logger_verbosity,
)
from kiln._session import InferenceSession, ModelMetadata, NodeArg

# The TensorRT-style API (builder, parser, runtime, network definition, plugins, custom ops).
from kiln import _trt  # noqa: E402
from kiln._trt import *  # noqa: E402,F401,F403

__version__: str = _kiln.__version__
SessionIOBinding = IOBinding

# onnxruntime's submodules (kiln.capi._pybind_state, ...), loaded as onnxruntime loads them; last,
# since they re-export the names above.
import kiln.capi._pybind_state  # noqa: E402,F401
from kiln import capi  # noqa: E402

__all__ = [
    "EngineError", "EPFail", "ExecutionMode", "ExecutionOrder", "Fail", "GraphOptimizationLevel",
    "IOBinding", "InferenceSession", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "ModelLoaded",
    "ModelMetadata", "NoModel", "NoSuchFile", "NodeArg", "NotImplemented", "OrtValue", "RunOptions",
    "RuntimeException", "SessionIOBinding", "SessionOptions", "__version__", "capi", "disable_telemetry_events",
    "enable_telemetry_events", "get_all_providers",
    "get_available_providers", "get_device", "get_version_string", "load_plugin_library",
    "set_default_logger_severity", "set_default_logger_verbosity",
] + _trt.__all__
