"""Model repositories for the serving tests and bench/serve_bench.py: small ONNX models made with
onnx.helper, laid out as Triton's <repo>/<model>/<version>/model.onnx + config.pbtxt."""
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 18)]


def mlp_model(path, inputs=16, hidden=32, outputs=8, seed=3):
    """x: float [batch, inputs] -> y = tanh(x @ w1 + b1) @ w2 [batch, outputs] and z = relu(x @ w1) [batch, hidden]."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32)
    b1 = rng.standard_normal(hidden).astype(np.float32)
    w2 = (rng.standard_normal((hidden, outputs)) / np.sqrt(hidden)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"], name="matmul1"),
         helper.make_node("Add", ["h", "b1"], ["hb"], name="add"),
         helper.make_node("Tanh", ["hb"], ["t"], name="tanh"),
         helper.make_node("MatMul", ["t", "w2"], ["y"], name="matmul2"),
         helper.make_node("Relu", ["h"], ["z"], name="relu")],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", outputs]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", hidden])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="kiln-tests")
    model.ir_version = 8
    onnx.save(model, str(path))
    return pathlib.Path(path)


def add_model(repo, name, config_text=None, version="1", maker=mlp_model, **kwargs):
    """Writes <repo>/<name>/<version>/model.onnx (and config.pbtxt when given); returns the model file."""
    version_dir = pathlib.Path(repo) / name / version
    version_dir.mkdir(parents=True, exist_ok=True)
    if config_text is not None:
        (pathlib.Path(repo) / name / "config.pbtxt").write_text(config_text)
    return maker(version_dir / "model.onnx", **kwargs)


def batching_config(name, max_batch_size=16, preferred=(8, 16), delay_us=2000, instances=1):
    """A config.pbtxt with dynamic batching for mlp_model."""
    sizes = ", ".join(str(s) for s in preferred)
    return (
        f'name: "{name}"\nmax_batch_size: {max_batch_size}\n'
        f"dynamic_batching {{ preferred_batch_size: [ {sizes} ] max_queue_delay_microseconds: {delay_us} }}\n"
        f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"
    )
