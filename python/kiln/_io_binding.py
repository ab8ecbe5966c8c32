"""IOBinding and OrtValue: onnxruntime's API for binding inputs and outputs, on CPU memory."""

from __future__ import annotations

import ctypes
from typing import Any, Sequence

import numpy as np

from kiln import _kiln


def _check_cpu(device_type: str) -> None:
    if str(device_type).lower() != "cpu":
        raise _kiln.InvalidArgument(
            f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : kiln runs on the CPU only; device '{device_type}' is not available"
        )


# ONNX TensorProto element type numbers -> numpy dtype names (ml_dtypes' for 16 and up).
_ONNX_ELEMENT_TYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "object",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
    17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
}


def _numpy_dtype(element_type: Any) -> np.dtype:
    """A numpy dtype from a numpy type or an ONNX TensorProto element type number."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        name = _ONNX_ELEMENT_TYPES.get(int(element_type))
        if name is None:
            raise ValueError(f"ONNX element type {element_type} has no numpy dtype in kiln")
        if int(element_type) >= 16:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, name))
        return np.dtype(name)
    return np.dtype(element_type)


def _array_at(address: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """A numpy array viewing caller-owned memory at `address`."""
    dtype = _numpy_dtype(element_type)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(tuple(shape))


class OrtValue:
    """A value on the CPU: a numpy array (or a list of them, for a sequence), as onnxruntime's
    OrtValue holds it."""

    def __init__(self, value: Any) -> None:
        self._value = value

    @staticmethod
    def ortvalue_from_numpy(numpy_obj: np.ndarray, device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        """Wraps `numpy_obj` (no copy)."""
        _check_cpu(device_type)
        return OrtValue(numpy_obj)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any = np.float32, device_type: str = "cpu", device_id: int = 0) -> "OrtValue":
        """A new zero-filled tensor of that shape and element type."""
        _check_cpu(device_type)
        return OrtValue(np.zeros(tuple(shape), dtype=_numpy_dtype(element_type)))

    def numpy(self) -> Any:
        """The value (the array itself, no copy)."""
        return self._value

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self._value, dtype=dtype)

    def data_ptr(self) -> int:
        """Address of the first element."""
        return int(self._value.ctypes.data)

    def device_name(self) -> str:
        """"cpu"."""
        return "cpu"

    def shape(self) -> list[int]:
        """The tensor's shape."""
        return list(self._value.shape)

    def data_type(self) -> str:
        """onnxruntime's type string: "tensor(float)"."""
        name = {"float32": "float", "float64": "double", "object": "string", "str": "string"}.get(
            self._value.dtype.name, self._value.dtype.name
        )
        return f"tensor({name})"

    def element_type(self) -> type:
        """The numpy scalar type of the elements."""
        return self._value.dtype.type

    def has_value(self) -> bool:
        """False for an absent optional."""
        return self._value is not None

    def is_tensor(self) -> bool:
        """True for a tensor (not a sequence or an absent optional)."""
        return isinstance(self._value, np.ndarray)

    def is_tensor_sequence(self) -> bool:
        """True for a sequence of tensors."""
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        """Always False: kiln has no sparse tensors."""
        return False

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Copies `np_arr` into this value's memory (same shape and dtype)."""
        np.copyto(self._value, np_arr, casting="no")


class IOBinding:
    """Inputs and outputs bound to a session for run_with_iobinding (CPU memory only).

    Bound inputs are read in place; an output bound with a buffer (buffer_ptr or an OrtValue)
    receives the result, others are returned by get_outputs / copy_outputs_to_cpu."""

    def __init__(self, session) -> None:
        self._session = session
        self._inputs: dict[str, Any] = {}
        self._outputs: dict[str, np.ndarray | None] = {}  # name -> caller's buffer, or None
        self._results: list = []

    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        """Binds a numpy array to input `name`."""
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name: str, device_type: str, device_id: int, element_type: Any, shape: Sequence[int], buffer_ptr: int) -> None:
        """Binds memory at address `buffer_ptr` holding a tensor of `element_type` and `shape`."""
        _check_cpu(device_type)
        self._inputs[name] = _array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        """Binds an OrtValue to input `name`."""
        self._inputs[name] = ortvalue.numpy()

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None, shape: Sequence[int] | None = None, buffer_ptr: int | None = None) -> None:
        """Binds output `name`, to memory at `buffer_ptr` when given (then element_type and shape too)."""
        _check_cpu(device_type)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise ValueError("`element_type` and `shape` are to be provided if pre-allocated memory is provided")
        self._outputs[name] = _array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Binds output `name` to an OrtValue's memory."""
        self._outputs[name] = ortvalue.numpy()

    def synchronize_inputs(self) -> None:
        """Nothing to do on the CPU."""

    def synchronize_outputs(self) -> None:
        """Nothing to do on the CPU."""

    def clear_binding_inputs(self) -> None:
        """Forgets the bound inputs."""
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        """Forgets the bound outputs."""
        self._outputs.clear()

    def get_outputs(self) -> list[OrtValue]:
        """The bound outputs of the last run, in binding order."""
        return [OrtValue(v) for v in self._results]

    def copy_outputs_to_cpu(self) -> list:
        """The bound outputs of the last run as numpy arrays (copies)."""
        return [v.copy() if isinstance(v, np.ndarray) else v for v in self._results]

    def _run(self, run_options) -> None:
        names = list(self._outputs)
        results = self._session.run(names, self._inputs, run_options)
        for name, result in zip(names, results):
            target = self._outputs[name]
            if target is None:
                continue
            if not isinstance(result, np.ndarray) or target.shape != result.shape or target.dtype != result.dtype:
                raise _kiln.InvalidArgument(
                    f"[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : output '{name}' is "
                    f"{getattr(result, 'dtype', type(result).__name__)} {getattr(result, 'shape', '')}, "
                    f"but the buffer bound to it is {target.dtype} {target.shape}"
                )
            np.copyto(target, result)
        self._results = [result if self._outputs[n] is None else self._outputs[n] for n, result in zip(names, results)]
