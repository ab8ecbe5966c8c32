"""Kernel selection as the CLI shows it: `kiln build --verbose` and `kiln inspect PLAN` name, per
layer, the candidate kernel chosen and why the candidates before it declined; the plan runs as
the ONNX file does."""
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper


def run(kiln, *args, timeout=300):
    return subprocess.run([str(kiln), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def has_avx512():
    with open("/proc/cpuinfo") as f:
        return " avx512f" in f.read()


def resnet_block(path):
    """ResNet-50's first stage shapes: 3x3 conv 64 -> 64 on 56x56 (pad 1), Relu, 1x1 conv 64 -> 64."""
    rng = np.random.default_rng(0)
    w3 = numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32), "w3")
    w1 = numpy_helper.from_array((rng.standard_normal((64, 64, 1, 1)) * 0.1).astype(np.float32), "w1")
    nodes = [
        helper.make_node("Conv", ["x", "w3"], ["a"], name="conv3x3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w1"], ["y"], name="conv1x1", kernel_shape=[1, 1]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w3, w1])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def layer_line(text, name):
    """The inspect line of layer `name` and the 'declined' lines under it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"\s+\d+\s+{name} \(", line):
            block = [line]
            for more in lines[i + 1:]:
                if not more.strip().startswith("declined "):
                    break
                block.append(more)
            return "\n".join(block)
    raise AssertionError(f"no layer {name} in\n{text}")


def test_inspect_shows_winograd_for_a_resnet_3x3_and_direct_for_a_1x1(kiln, tmp_path):
    """The heuristics (optimization level 0: nothing timed): on AVX-512 the 3x3 runs Winograd
    F(4x4); on AVX2 that candidate declines by ISA and the direct convolution takes it."""
    model = resnet_block(tmp_path / "block.onnx")
    plan = tmp_path / "block.kiln"
    built = run(kiln, "build", model, "-o", plan, "--verbose", "--builder-optimization-level", "0")
    assert built.returncode == 0, built.stderr
    isa, feature = ("avx512", "avx512f") if has_avx512() else ("avx2", "avx2")
    conv3_kernel = "f32_nchwc_conv_winograd_f4x4_avx512" if has_avx512() else "f32_nchwc_conv_direct_avx2"
    assert f"(NchwcConv): kernel {conv3_kernel}" in built.stdout, built.stdout
    shown = run(kiln, "inspect", plan)
    assert shown.returncode == 0, shown.stderr
    conv3 = layer_line(shown.stdout, "conv3x3")
    assert f"kernel {conv3_kernel} ({feature})" in conv3, conv3
    if not has_avx512():
        assert "declined f32_nchwc_conv_winograd_f4x4_avx512: needs avx512f" in conv3, conv3
    conv1 = layer_line(shown.stdout, "conv1x1")
    assert f"kernel f32_nchwc_conv_direct_{isa} ({feature})" in conv1, conv1
    # The candidates tried before it, each with its reason.
    winograd_reason = "takes 3x3 ungrouped convolutions" if has_avx512() else "needs avx512f"
    assert f"declined f32_nchwc_conv_winograd_f4x4_avx512: {winograd_reason}" in conv1, conv1
    assert f"declined f32_nchwc_conv_depthwise_{isa}: group is 1, not depthwise" in conv1, conv1
    assert f"declined f32_nchwc_conv_plain_input_{isa}: X is not plain NCHW (rank 4)" in conv1, conv1


def test_plan_with_chosen_kernels_matches_onnxruntime(kiln, tmp_path):
    model = resnet_block(tmp_path / "block.onnx")
    plan = tmp_path / "block.kiln"
    assert run(kiln, "build", model, "-o", plan).returncode == 0
    x = np.random.default_rng(1).standard_normal((1, 64, 56, 56)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for target, out in ((plan, tmp_path / "plan_out"), (model, tmp_path / "onnx_out")):
        r = run(kiln, "run", target, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out)
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(out / "y.npy"), expected, rtol=1e-3, atol=1e-3)
