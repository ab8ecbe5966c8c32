"""Multiply-accumulate count of an ONNX model's Conv, ConvTranspose, Gemm, MatMul and recurrent nodes.

Shapes come from onnx.shape_inference, so the model needs static input shapes (a free first dim is the
batch, given to model_gflop; other free dims count as 1, as bench/model_inputs.py makes them). Where
inference leaves a counted node's shapes unknown (a Slice whose ends are computed in the graph, as
torchvision's ShuffleNet exports its channel split), one onnxruntime run on zero inputs that returns those
tensors too measures them. Other ops
(elementwise, pooling, softmax, resize) are not counted: GFLOP = 2 x MACs of those ops, the usual convention.
An LSTM, GRU or RNN counts its input and recurrence products, every time step and direction (the gates'
elementwise work is not counted).
"""
import math

import numpy as np
import onnx
import onnx.helper
import onnx.shape_inference

COUNTED = ("Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU", "RNN")


def _shapes(model):
    """Name -> list of dims (None when unknown) for every value with inferred or declared shape."""
    # data_prop: shapes computed in the graph (Shape -> Gather -> Concat -> Reshape, as PyTorch exports) resolve too
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    graph = inferred.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        tensor_type = value.type.tensor_type
        if tensor_type.HasField("shape"):
            shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    unknown = sorted({name for node in graph.node if node.op_type in COUNTED for name in _counted_tensors(node)
                      if shapes.get(name) is None or None in shapes[name]})
    if unknown:
        shapes.update(_shapes_from_a_run(inferred, unknown))
    return shapes


def _counted_tensors(node):
    """The tensors whose shapes node_macs reads."""
    if node.op_type in ("Conv", "ConvTranspose"):
        return [node.input[0], node.input[1], node.output[0]]
    if node.op_type in ("Gemm", "MatMul"):
        return [node.input[0], node.output[0]]
    return list(node.input[:3])


def _shapes_from_a_run(model, names):
    """Shapes of `names`, measured by running `model` (static inputs) once in onnxruntime on zeros."""
    import onnxruntime  # only this fallback needs it

    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.value_info) + list(model.graph.input)}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    initializers = {init.name for init in probe.graph.initializer}
    wanted = [n for n in names if n not in initializers]
    for name in wanted:
        if name not in present:
            probe.graph.output.append(
                onnx.helper.make_tensor_value_info(name, types.get(name) or onnx.TensorProto.FLOAT, None))
    session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    for value in session.get_inputs():
        dtype = onnx.helper.tensor_dtype_to_np_dtype(types[value.name])
        feeds[value.name] = np.zeros(value.shape, dtype=dtype)
    return {name: list(array.shape) for name, array in zip(wanted, session.run(wanted, feeds))}


def _attribute(node, name, default):
    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _known(node, shapes, *names):
    dims = [shapes.get(name) for name in names]
    for name, shape in zip(names, dims):
        if shape is None or any(d is None for d in shape):
            raise ValueError(f"node '{node.name}' ({node.op_type}): shape of '{name}' is unknown; "
                             "give the model static input shapes")
    return dims


def node_macs(node, shapes):
    """MACs of one node (0 for ops that are not counted)."""
    if node.op_type == "Conv":
        out, weight = _known(node, shapes, node.output[0], node.input[1])
        # each output element sums Cin/group x kernel taps products
        return math.prod(out) * math.prod(weight[1:])
    if node.op_type == "ConvTranspose":
        x, weight = _known(node, shapes, node.input[0], node.input[1])
        # each input element scatters into Cout/group x kernel taps outputs
        return math.prod(x) * math.prod(weight[1:])
    if node.op_type == "Gemm":
        a, out = _known(node, shapes, node.input[0], node.output[0])
        k = a[0] if _attribute(node, "transA", 0) else a[1]
        return math.prod(out) * k
    if node.op_type == "MatMul":
        a, out = _known(node, shapes, node.input[0], node.output[0])
        return math.prod(out) * a[-1]
    if node.op_type in ("LSTM", "GRU", "RNN"):
        x, weight, recurrence = _known(node, shapes, *node.input[:3])
        steps_times_batch = x[0] * x[1]  # layout 0 or 1: the first two dims are sequence and batch either way
        return steps_times_batch * (math.prod(weight) + math.prod(recurrence))
    return 0


def model_macs(model):
    """Total MACs of the counted ops of `model` (an onnx.ModelProto), subgraphs excluded."""
    shapes = _shapes(model)
    return sum(node_macs(node, shapes) for node in model.graph.node)


def fix_free_dims(model, batch):
    """Sets the inputs' free dims in place: a first dim to `batch`, the others to 1."""
    initializers = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                dim.dim_value = batch if axis == 0 else 1


def model_gflop(path, batch=1):
    """GFLOP (2 x MACs / 1e9) of the ONNX model at `path`, a free batch dim set to `batch`."""
    model = onnx.load(str(path))
    fix_free_dims(model, batch)
    return 2.0 * model_macs(model) / 1e9
