"""kiln run / kiln build refuse a shape whose tensors need more than the default allocation limit
(90 % of this machine's physical memory) naming node, output, bytes and limit; --memory-limit above
the default raises it and --memory-limit 0 makes the whole of physical memory the limit (issue 22)."""
import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save

ROWS = 65536  # x [65536, 1]: 256 KiB of random input


def physical_memory():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def mib(n):
    return f"{n >> 20} MiB"


@pytest.fixture()
def wide(tmp_path):
    """x [n, 1] MatMul 'mm' w [1, K] -> h -> Relu -> y, with h [65536, K] over physical memory."""
    columns = physical_memory() // (4 * ROWS) + 1
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.full((1, columns), 0.5, np.float32), "w")])
    path = tmp_path / "wide.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, f"node 'mm' (MatMul): output 0 'h' float32[{ROWS}x{columns}] needs {mib(4 * ROWS * columns)}, "


def kiln_error(kiln, *args):
    p = subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    return p.stderr


def test_run_refuses_a_shape_over_the_default_limit(kiln, wide):
    model, refused = wide
    default = physical_memory() // 10 * 9
    err = kiln_error(kiln, "run", model, "--shapes", f"x:{ROWS}x1")
    assert refused + f"over the default allocation limit of {mib(default)} (90 % of this machine's memory)" in err


def test_build_refuses_a_profile_over_the_default_limit(kiln, wide, tmp_path):
    model, refused = wide
    err = kiln_error(kiln, "build", model, "--shapes", f"x:{ROWS}x1", "-o", tmp_path / "wide.kiln")
    assert "optimization profile 0" in err and refused + "over the default allocation limit of" in err


def test_a_memory_limit_above_the_default_raises_it(kiln, wide):
    model, refused = wide
    raised = (physical_memory() // 10 * 9 >> 20) + 1  # MiB, still below what h needs
    err = kiln_error(kiln, "run", model, "--shapes", f"x:{ROWS}x1", "--memory-limit", raised)
    assert refused + f"over the allocation limit of {raised} MiB" in err


def test_memory_limit_zero_is_the_whole_physical_memory(kiln, wide):
    model, refused = wide
    err = kiln_error(kiln, "run", model, "--shapes", f"x:{ROWS}x1", "--memory-limit", 0)
    assert refused + f"over the allocation limit of {mib(physical_memory())}" in err
