"""Custom ops written in Python, usable from ONNX models and from the network API.

    @kiln.custom_op("my.domain", "ScaledTanh", shape=lambda x, **attrs: x)
    def scaled_tanh(x, *, alpha=1.0):
        return np.tanh(x) * alpha

An ONNX node of op type "ScaledTanh" in domain "my.domain" then runs this function (its attributes
as keyword arguments), through kiln.InferenceSession and through the builder; in a network,
`network.add_plugin_v2([x], scaled_tanh.create_plugin(alpha=2.0))` adds one.

The shape function receives one tuple of kiln.DimExpr per input (the dims, valid for every
shape a dynamic input takes) and the attributes, and returns the output's shape (or, for
several outputs, a list of shapes) of ints and DimExprs: `lambda a, b: (a[0], b[1])`. Without
one, every output has the shape of input 0; without `dtypes`, its type.

The compute function receives read-only numpy views of the inputs (valid during the call only:
copy what you keep) and returns an array per output, of the shape the shape function gives.
It runs with the GIL held, on the engine's threads; the rest of the run does not hold it. An
exception it raises fails the run with a kiln error naming the node and the exception. A plan
built with the op records it: loading the plan needs the same registration.
"""

from __future__ import annotations

import atexit
from typing import Any, Callable, Sequence

from kiln import _kiln
from kiln._trt_types import data_type


class CustomOp:
    """A registered Python op; calling it calls the compute function."""

    def __init__(self, domain: str, name: str, version: str, fn: Callable[..., Any]) -> None:
        self.domain = domain
        self.name = name
        self.version = version
        self.fn = fn
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def create_plugin(self, **attrs: Any) -> _kiln.IPluginV2:
        """A plugin of this op with the given attributes, for network.add_plugin_v2."""
        return _kiln._create_custom_op_plugin(self.domain, self.name, self.version, attrs)

    def unregister(self) -> None:
        """Removes the op from kiln's registry (models and plans that use it then fail to load)."""
        _kiln._deregister_custom_op(self.domain, self.name, self.version)

    def __repr__(self) -> str:
        return f"<kiln.CustomOp {self.domain}::{self.name} version {self.version}>"


def custom_op(
    domain: str,
    name: str,
    *,
    shape: Callable[..., Any] | None = None,
    num_outputs: int = 1,
    dtypes: Sequence[Any] | None = None,
    version: str = "1",
) -> Callable[[Callable[..., Any]], CustomOp]:
    """Registers the decorated numpy function as the op (domain, name); see the module docs."""

    def register(fn: Callable[..., Any]) -> CustomOp:
        types = [data_type(t) for t in dtypes] if dtypes is not None else []
        _kiln._register_custom_op(domain, name, version, fn, shape, num_outputs, types)
        return CustomOp(domain, name, version, fn)

    return register


# kiln's registry is a C++ static that outlives the interpreter: give the functions back first.
atexit.register(_kiln._release_custom_ops_at_exit)
