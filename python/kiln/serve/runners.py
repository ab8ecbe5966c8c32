"""What runs a model version: an InferenceSession over an ONNX file, or an engine (a plan) with one
execution context per instance. Both are called from the instance threads of the scheduler."""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

import kiln
from kiln.serve.datatypes import v2_from_numpy, v2_from_onnx

PLAN_MAGIC = b"KILNPLAN"


@dataclasses.dataclass
class TensorSpec:
    """An input or output as the v2 protocol shows it: -1 for a dim that varies."""

    name: str
    datatype: str
    shape: list[int]


def is_plan_file(path: pathlib.Path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(PLAN_MAGIC)) == PLAN_MAGIC


class SessionRunner:
    """One InferenceSession shared by every instance: its run() may be called from several threads
    at once, each run with its own tensors."""

    platform = "kiln_onnx"

    def __init__(self, path: pathlib.Path, threads: int) -> None:
        options = kiln.SessionOptions()
        options.intra_op_num_threads = threads
        self._session = kiln.InferenceSession(str(path), options)
        self.inputs = [_session_spec(arg, "input") for arg in self._session.get_inputs()]
        self.outputs = [_session_spec(arg, "output") for arg in self._session.get_outputs()]

    def run(self, feed: dict, output_names: list[str] | None, instance: int) -> list[np.ndarray]:
        return self._session.run(output_names, feed)


def _session_spec(arg, kind: str) -> TensorSpec:
    try:
        datatype = v2_from_onnx(arg.type)
    except ValueError:
        raise ValueError(f"{kind} '{arg.name}' is of type {arg.type}: the v2 protocol carries tensors only") from None
    return TensorSpec(arg.name, datatype, [d if isinstance(d, int) else -1 for d in arg.shape])


class EngineRunner:
    """A deserialized plan: one immutable engine, one execution context per instance (a context
    runs one inference at a time, so instance i always uses context i)."""

    platform = "kiln_plan"

    def __init__(self, plan: bytes, instances: int) -> None:
        self.engine = kiln.Runtime(kiln.Logger(kiln.Logger.WARNING)).deserialize_cuda_engine(plan)
        self._contexts = [self.engine.create_execution_context() for _ in range(instances)]
        self.inputs, self.outputs = [], []
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            dtype = np.dtype(kiln.nptype(self.engine.get_tensor_dtype(name)))
            spec = TensorSpec(name, v2_from_numpy(dtype), [int(d) for d in self.engine.get_tensor_shape(name)])
            is_input = self.engine.get_tensor_mode(name) == kiln.TensorIOMode.INPUT
            (self.inputs if is_input else self.outputs).append(spec)

    def run(self, feed: dict, output_names: list[str] | None, instance: int) -> list[np.ndarray]:
        names = output_names if output_names is not None else [o.name for o in self.outputs]
        known = [o.name for o in self.outputs]
        for name in names:
            if name not in known:
                raise kiln.InvalidArgument(f"'{name}' is not an output of the engine; its outputs are {', '.join(known)}")
        results = self._contexts[instance].infer(feed)
        return [results[name] for name in names]

    def batch_range(self, name: str) -> tuple[int, int]:
        """The smallest and largest dim 0 the engine's first profile allows for an input."""
        low, _, high = self.engine.get_tensor_profile_shape(name, 0)
        return int(low[0]), int(high[0])
