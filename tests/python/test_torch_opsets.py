"""One network exported by torch's TorchScript exporter at every opset it offers (9 to 17 in
Debian's torch 1.13; tests/models/export_opset_matrix.py): each opset's spelling of the same ops
(Upsample vs Resize, attribute vs input forms of Slice/Pad/Clip/Squeeze/ReduceSum, LayerNorm
decomposed vs LayerNormalization) runs in kiln and matches torch and ONNX Runtime."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln

OPSETS = range(9, 18)
OUTPUTS = ("log_probs", "summary")


def test_each_opset_uses_its_own_spelling(opset_matrix):
    ops = {opset: {n.op_type for n in onnx.load(str(opset_matrix / f"mixed_opset{opset}.onnx")).graph.node}
           for opset in (9, 10, 17)}
    assert "Upsample" in ops[9] and "Resize" not in ops[9]
    assert "Resize" in ops[10]
    assert "LayerNormalization" in ops[17] and "LayerNormalization" not in ops[10]


@pytest.mark.parametrize("opset", OPSETS)
def test_opset_matches_torch_and_onnxruntime(opset_matrix, opset):
    path = str(opset_matrix / f"mixed_opset{opset}.onnx")
    x = np.load(opset_matrix / "input.npy")
    expected = [np.load(opset_matrix / f"expected_{name}.npy") for name in OUTPUTS]
    session = kiln.InferenceSession(path)
    got = session.run(None, {"x": x})
    for value, reference in zip(got, expected):
        np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-5)
    # Another batch size through the dynamic axis, against onnxruntime.
    batch = np.random.default_rng(opset).standard_normal((3, 3, 16, 16), dtype=np.float32)
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": batch})
    for value, theirs in zip(session.run(None, {"x": batch}), reference):
        np.testing.assert_allclose(value, theirs, rtol=1e-5, atol=1e-5)
