"""Tensor element types under their three names: KServe v2 ("FP32"), ONNX ("tensor(float)") and
Triton's ModelConfig ("TYPE_FP32"), with the numpy dtype kiln takes and gives."""

from __future__ import annotations

import numpy as np

try:  # bfloat16 arrays come from ml_dtypes, as in the rest of the package (docs/python.md)
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # pragma: no cover - ml_dtypes is optional
    _bfloat16 = None

# (v2 name, ONNX type, ModelConfig type, numpy dtype or None when not available)
_TABLE = [
    ("BOOL", "tensor(bool)", "TYPE_BOOL", np.dtype(np.bool_)),
    ("UINT8", "tensor(uint8)", "TYPE_UINT8", np.dtype(np.uint8)),
    ("UINT16", "tensor(uint16)", "TYPE_UINT16", np.dtype(np.uint16)),
    ("UINT32", "tensor(uint32)", "TYPE_UINT32", np.dtype(np.uint32)),
    ("UINT64", "tensor(uint64)", "TYPE_UINT64", np.dtype(np.uint64)),
    ("INT8", "tensor(int8)", "TYPE_INT8", np.dtype(np.int8)),
    ("INT16", "tensor(int16)", "TYPE_INT16", np.dtype(np.int16)),
    ("INT32", "tensor(int32)", "TYPE_INT32", np.dtype(np.int32)),
    ("INT64", "tensor(int64)", "TYPE_INT64", np.dtype(np.int64)),
    ("FP16", "tensor(float16)", "TYPE_FP16", np.dtype(np.float16)),
    ("FP32", "tensor(float)", "TYPE_FP32", np.dtype(np.float32)),
    ("FP64", "tensor(double)", "TYPE_FP64", np.dtype(np.float64)),
    ("BYTES", "tensor(string)", "TYPE_STRING", np.dtype(object)),
    ("BF16", "tensor(bfloat16)", "TYPE_BF16", np.dtype(_bfloat16) if _bfloat16 is not None else None),
]
V2_NAMES = [row[0] for row in _TABLE]
_BY_V2 = {row[0]: row for row in _TABLE}
_BY_ONNX = {row[1]: row for row in _TABLE}
_BY_CONFIG = {row[2]: row for row in _TABLE}


def numpy_dtype(v2_name: str) -> np.dtype:
    """The numpy dtype of a v2 datatype; ValueError naming the known ones otherwise."""
    row = _BY_V2.get(v2_name)
    if row is None:
        raise ValueError(f"unknown datatype '{v2_name}' (known: {', '.join(V2_NAMES)})")
    if row[3] is None:
        raise ValueError(f"datatype {v2_name} needs the ml_dtypes package (pip install ml_dtypes)")
    return row[3]


def v2_from_onnx(onnx_type: str) -> str:
    """"tensor(float)" -> "FP32"; ValueError for types the protocol has no name for (sequences)."""
    row = _BY_ONNX.get(onnx_type)
    if row is None:
        raise ValueError(f"type {onnx_type} has no KServe v2 datatype")
    return row[0]


def v2_from_numpy(dtype: np.dtype) -> str:
    for row in _TABLE:
        if row[3] is not None and row[3] == dtype:
            return row[0]
    if dtype.kind in "US":
        return "BYTES"
    raise ValueError(f"numpy dtype {dtype} has no KServe v2 datatype")


def v2_from_config(config_type: str) -> str:
    return _BY_CONFIG[config_type][0]


def config_from_v2(v2_name: str) -> str:
    return _BY_V2[v2_name][2]
