"""Tactics through the CLI: `kiln build --builder-optimization-level N --timing-cache FILE` and
`kiln inspect PLAN --verbose`; a level-3 plan's outputs against ONNX Runtime."""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def run(kiln, *args, timeout=300):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def conv_net(path):
    """x [1, 8, 16, 16] -> Conv 3x3 (8->32) -> Relu -> Conv 3x3 (32->32) -> Relu -> Conv 1x1 (32->16)
    -> GlobalAveragePool -> Flatten -> Gemm (16->10)."""
    rng = np.random.default_rng(0)

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [weight("w1", 32, 8, 3, 3), weight("b1", 32), weight("w2", 32, 32, 3, 3), weight("b2", 32),
             weight("w3", 16, 32, 1, 1), weight("b3", 16), weight("wf", 10, 16), weight("bf", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], name="conv3"),
        helper.make_node("GlobalAveragePool", ["c3"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_level3_plan_records_tactics_and_matches_onnxruntime(kiln, tmp_path):
    model = conv_net(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--threads", "1", "--builder-optimization-level", "3")
    assert r.returncode == 0, r.stderr
    assert "tactics at optimization level 3: " in r.stdout and " layers timed (" in r.stdout, r.stdout
    r = run(kiln, "inspect", plan, "--verbose")
    assert r.returncode == 0, r.stderr
    for fragment in ("format     5", "opt level  3 (tactics timed)", "choice  timed: fastest of ", "  <- chosen",
                     "tactic  ", " ms"):
        assert fragment in r.stdout, fragment
    # Every timed layer names exactly one chosen candidate, the one its kernel line shows.
    assert r.stdout.count("<- chosen") == r.stdout.count("choice  timed")

    x = np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = run(kiln, "run", plan, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), expected, rtol=1e-4, atol=1e-4)


def test_level0_keeps_the_heuristics_choice(kiln, tmp_path):
    model = conv_net(tmp_path / "m.onnx")
    plan = tmp_path / "m.kiln"
    r = run(kiln, "build", model, "-o", plan, "--builder-optimization-level", "0")
    assert r.returncode == 0, r.stderr
    assert "layers timed" not in r.stdout
    r = run(kiln, "inspect", plan, "--verbose")
    assert "opt level  0 (heuristics only)" in r.stdout
    assert "choice  heuristics" in r.stdout and "tactic  " not in r.stdout


def test_warm_timing_cache_times_nothing_and_a_damaged_one_is_refused(kiln, tmp_path):
    model = conv_net(tmp_path / "m.onnx")
    cache = tmp_path / "tactics.cache"
    r = run(kiln, "build", model, "-o", tmp_path / "a.kiln", "--threads", "1", "--timing-cache", cache)
    assert r.returncode == 0, r.stderr
    assert cache.exists() and cache.read_bytes()[:8] == b"KILNTCAC"
    timed = int(r.stdout.split(" layers timed")[0].rsplit(" ", 1)[1])
    assert timed >= 1, r.stdout
    r = run(kiln, "build", model, "-o", tmp_path / "b.kiln", "--threads", "1", "--timing-cache", cache)
    assert r.returncode == 0, r.stderr
    assert f"0 layers timed (0 runs), {timed} from the timing cache" in r.stdout, r.stdout
    assert "choice  timing cache: fastest of " in run(kiln, "inspect", tmp_path / "b.kiln", "--verbose").stdout
    # Another thread count is another key: timed again.
    r = run(kiln, "build", model, "-o", tmp_path / "c.kiln", "--threads", "2", "--timing-cache", cache)
    assert f"{timed} layers timed" in r.stdout, r.stdout

    data = bytearray(cache.read_bytes())
    data[-2] ^= 0x10
    cache.write_bytes(bytes(data))
    r = run(kiln, "build", model, "-o", tmp_path / "d.kiln", "--timing-cache", cache)
    assert r.returncode != 0
    assert f"timing cache '{cache}': checksum mismatch" in r.stderr, r.stderr
    cache.write_bytes(b"not a cache at all, just some bytes here....")
    r = run(kiln, "build", model, "-o", tmp_path / "d.kiln", "--timing-cache", cache)
    assert r.returncode != 0 and f"timing cache '{cache}': not a kiln timing cache" in r.stderr, r.stderr


def test_optimization_level_outside_range_is_refused(kiln, tmp_path):
    model = conv_net(tmp_path / "m.onnx")
    r = run(kiln, "build", model, "-o", tmp_path / "m.kiln", "--builder-optimization-level", "7")
    assert r.returncode != 0 and "--builder-optimization-level" in r.stderr, r.stderr
