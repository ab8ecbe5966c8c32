"""Models whose weights live outside the .onnx file, as onnx.save_model and exporters write them:
one file per tensor, several tensors at offsets in one shared file, subfolders, and a model whose
weights pass protobuf's 2 GiB limit. Each runs in kiln and matches ONNX Runtime."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

import kiln


def _embedding_model(tables):
    """y = sum over tables of Gather(table, ids): reads rows from every weight."""
    nodes, terms = [], []
    for i, name in enumerate(tables):
        nodes.append(helper.make_node("Gather", [name, "ids"], [f"rows_{i}"]))
        terms.append(f"rows_{i}")
    nodes.append(helper.make_node("Sum", terms, ["y"]))
    rows, width = next(iter(tables.values())).shape
    graph = helper.make_graph(
        nodes, "tables", [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, width])],
        [numpy_helper.from_array(table, name) for name, table in tables.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _compare(path, ids):
    reference = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    got = kiln.InferenceSession(str(path)).run(None, {"ids": ids})[0]
    np.testing.assert_array_equal(got, reference)
    return got


def _tables(count, rows, width, seed=0):
    rng = np.random.default_rng(seed)
    return {f"table_{i}": rng.standard_normal((rows, width), dtype=np.float32) for i in range(count)}


def test_one_external_file_per_tensor(tmp_path):
    tables = _tables(3, 64, 8)
    model = _embedding_model(tables)
    onnx.save_model(model, str(tmp_path / "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "table_0", "table_1", "table_2"]
    ids = np.array([0, 63, 5], np.int64)
    np.testing.assert_array_equal(_compare(tmp_path / "model.onnx", ids), sum(t[ids] for t in tables.values()))


def test_tensors_at_offsets_in_shared_files_in_a_subfolder(tmp_path):
    tables = _tables(4, 32, 16, seed=1)
    model = _embedding_model(tables)
    (tmp_path / "weights").mkdir()
    # Two tensors per file, the second at an offset past the first (aligned as onnx aligns them).
    for i, init in enumerate(model.graph.initializer):
        location = f"weights/part_{i // 2}.bin"
        offset = 0 if i % 2 == 0 else 4096
        with open(tmp_path / location, "r+b" if i % 2 else "wb") as f:
            f.seek(offset)
            f.write(init.raw_data)
        set_external_data(init, location, offset=offset, length=len(init.raw_data))
        init.ClearField("raw_data")
    onnx.save_model(model, str(tmp_path / "model.onnx"))
    ids = np.array([31, 0, 7], np.int64)
    np.testing.assert_array_equal(_compare(tmp_path / "model.onnx", ids), sum(t[ids] for t in tables.values()))


@pytest.mark.heavy
def test_weights_past_2_gib_in_several_files(tmp_path):
    # Two 1.1 GiB tables: together past what one protobuf may hold, so only external data works.
    rows, width = 1 << 20, 288
    tables = {f"table_{i}": np.full((rows, width), i + 1, np.float32) for i in range(2)}
    for i, table in enumerate(tables.values()):
        table[rows - 1] = -(i + 1)  # the last row differs, so reading it proves the file's end is reached
    model = _embedding_model(tables)
    del tables
    onnx.save_model(model, str(tmp_path / "big.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    del model
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) > 2 * 2**30
    ids = np.array([0, (1 << 20) - 1, 12345], np.int64)
    got = _compare(tmp_path / "big.onnx", ids)
    np.testing.assert_array_equal(got[:, 0], [3, -3, 3])
