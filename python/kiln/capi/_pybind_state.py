"""onnxruntime.capi._pybind_state: the same names as onnxruntime_pybind11_state."""

from kiln.capi.onnxruntime_pybind11_state import *  # noqa: F401,F403
from kiln.capi.onnxruntime_pybind11_state import __all__  # noqa: F401
