"""Types of the TensorRT-style API written in Python: dtype conversions (kiln.nptype), Weights,
PluginField and PluginFieldCollection, and the trt.float32-style dtype names."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from kiln import _kiln

DataType = _kiln.DataType

_NUMPY_OF = {
    DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.DOUBLE: np.float64,
    DataType.INT8: np.int8, DataType.UINT8: np.uint8, DataType.INT16: np.int16, DataType.UINT16: np.uint16,
    DataType.INT32: np.int32, DataType.UINT32: np.uint32, DataType.INT64: np.int64, DataType.UINT64: np.uint64,
    DataType.BOOL: np.bool_, DataType.STRING: np.object_,
}
_ML_DTYPES_OF = {DataType.BF16: "bfloat16", DataType.FP8: "float8_e4m3fn", DataType.INT4: "int4"}


def nptype(dtype: DataType) -> Any:
    """The numpy type of a kiln.DataType (bfloat16, fp8 and int4 need ml_dtypes)."""
    dtype = DataType(dtype)
    if dtype in _NUMPY_OF:
        return _NUMPY_OF[dtype]
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(f"kiln.nptype: {dtype} needs the ml_dtypes package (pip install ml_dtypes)") from None
    return getattr(ml_dtypes, _ML_DTYPES_OF[dtype])


def data_type(value: Any) -> DataType:
    """A kiln.DataType from itself or from a numpy dtype / type (np.float32, "float32")."""
    if isinstance(value, DataType):
        return value
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError(f"not a kiln.DataType or numpy dtype: {value!r}") from None
    for kiln_type, np_type in _NUMPY_OF.items():
        if dt == np.dtype(np_type):
            return kiln_type
    for kiln_type, name in _ML_DTYPES_OF.items():
        if dt.name == name:
            return kiln_type
    raise TypeError(f"numpy dtype {dt} has no kiln.DataType")


def volume(shape: Iterable[int]) -> int:
    """The element count of a shape (TensorRT's trt.volume)."""
    count = 1
    for d in shape:
        count *= int(d)
    return count


class Weights:
    """Layer weights: a numpy array (kept as given; the network copies the values when a layer is
    added). Weights() is no weights, as for a missing bias."""

    def __init__(self, a: Any = None) -> None:
        self._array = None if a is None else np.ascontiguousarray(a)

    def numpy(self) -> np.ndarray | None:
        """The array (None for no weights)."""
        return self._array

    @property
    def nbytes(self) -> int:
        return 0 if self._array is None else self._array.nbytes

    @property
    def size(self) -> int:
        return 0 if self._array is None else self._array.size

    @property
    def dtype(self) -> DataType | None:
        return None if self._array is None else data_type(self._array.dtype)


class PluginField:
    """One named plugin field: `data` is a numpy array (or a Python value); `type` is accepted for
    TensorRT's signature and otherwise unused, as kiln reads the type from the data and the
    creator's field list."""

    def __init__(self, name: str = "", data: Any = None, type: Any = None) -> None:  # noqa: A002
        self.name = name
        self.data = data
        self.type = type


class PluginFieldCollection(list):
    """A list of PluginField, for IPluginCreator.create_plugin."""

    def __init__(self, fields: Sequence[PluginField] = ()) -> None:
        super().__init__(fields)


float32 = DataType.FLOAT
float16 = DataType.HALF
bfloat16 = DataType.BF16
int8 = DataType.INT8
uint8 = DataType.UINT8
int32 = DataType.INT32
int64 = DataType.INT64
bool = DataType.BOOL  # noqa: A001  (TensorRT's name)
