"""Random inputs for a benchmark model, written as .npy files that both engines read.

Float inputs are standard normal; integer inputs are uniform in [0, bound), where bound is the row count
of the constant table they index when they feed a Gather (token ids into an embedding), else 16.
Free dims are set to 1, except a free first dim, the batch, which is set to `batch`. The generator is
seeded, so every run of the harness uses the same inputs.
"""
import pathlib

import numpy as np
import onnx

DEFAULT_INT_BOUND = 16
NUMPY_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.BOOL: np.bool_,
}


def _gather_bounds(graph):
    """Input name -> rows of the initializer it indexes through a Gather (axis 0 only)."""
    initializers = {init.name: list(init.dims) for init in graph.initializer}
    bounds = {}
    for node in graph.node:
        if node.op_type != "Gather" or node.input[0] not in initializers:
            continue
        axis = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        if axis == 0:
            bounds[node.input[1]] = initializers[node.input[0]][0]
    return bounds


def _free(dim):
    return not dim.HasField("dim_value")


def graph_inputs(model):
    initializer_names = {init.name for init in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializer_names]


def has_free_batch(model_path):
    """Whether some input's first dim is free (a symbol or unknown), so that its batch size can be chosen."""
    model = onnx.load(str(model_path), load_external_data=False)
    return any(v.type.tensor_type.shape.dim and _free(v.type.tensor_type.shape.dim[0]) for v in graph_inputs(model))


def make_inputs(model_path, out_dir, seed=0, batch=1):
    """Writes OUT_DIR/<index>.npy for each graph input; returns {input name: path}."""
    model = onnx.load(str(model_path), load_external_data=False)
    graph = model.graph
    bounds = _gather_bounds(graph)
    rng = np.random.default_rng(seed)
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for index, value in enumerate(graph_inputs(model)):
        elem_type = value.type.tensor_type.elem_type
        if elem_type not in NUMPY_TYPES:
            raise ValueError(f"{model_path}: input '{value.name}' has element type "
                             f"{onnx.TensorProto.DataType.Name(elem_type)}, which the harness cannot generate")
        dtype = NUMPY_TYPES[elem_type]
        dims = value.type.tensor_type.shape.dim
        shape = [(batch if axis == 0 else 1) if _free(d) else d.dim_value for axis, d in enumerate(dims)]
        if np.issubdtype(dtype, np.floating):
            array = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            array = rng.integers(0, 2, shape).astype(dtype)
        else:
            array = rng.integers(0, bounds.get(value.name, DEFAULT_INT_BOUND), shape).astype(dtype)
        path = out_dir / f"input{index}.npy"
        np.save(path, array)
        files[value.name] = path
    return files
