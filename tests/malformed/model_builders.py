"""Small ONNX-building helpers shared by the malformed cases (onnx.helper underneath)."""
import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def info(name, dtype=FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, values, dtype=np.int64):
    return onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def graph(nodes, inputs, outputs, initializers=(), name="g"):
    return helper.make_graph(nodes, name, inputs, outputs, list(initializers))


def model(g, opset=17, ir_version=None):
    """A ModelProto of graph `g` importing ai.onnx at `opset` (None: no opset import at all)."""
    opsets = [] if opset is None else [helper.make_opsetid("", opset)]
    m = helper.make_model(g, opset_imports=opsets, producer_name="malformed-corpus")
    if ir_version is not None:
        m.ir_version = ir_version
    return m


def save(workdir, m, name="model.onnx"):
    """Writes `m` without onnx.checker (the point is to write what the checker would refuse)."""
    path = workdir / name
    path.write_bytes(m.SerializeToString())
    return path


def one_node(op, inputs, outputs=None, initializers=(), opset=17, **attrs):
    """A model of one node named 'n': `inputs` are value infos (graph inputs) or initializers
    (TensorProto), in the node's input order; `outputs` default to one float 'y' of unknown shape."""
    outputs = outputs or [info("y")]
    names = [i.name for i in inputs]
    graph_inputs = [i for i in inputs if isinstance(i, onnx.ValueInfoProto)]
    inits = [i for i in inputs if isinstance(i, onnx.TensorProto)] + list(initializers)
    node = helper.make_node(op, names, [o.name for o in outputs], name="n", **attrs)
    return model(graph([node], graph_inputs, outputs, inits), opset=opset)


def feeds(workdir, **arrays):
    """Writes each array as NAME.npy and returns the matching `--input NAME=FILE` arguments."""
    args = []
    for name, array in arrays.items():
        path = workdir / f"{name}.npy"
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    return args
