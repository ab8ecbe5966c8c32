"""One network exported by torch's TorchScript exporter at every opset it offers (9 to 17 in
Debian's torch 1.13; tests/models/export_opset_matrix.py): each opset's spelling of the same ops
(Upsample vs Resize, attribute vs input forms of Slice/Pad/Clip/Squeeze/ReduceSum, LayerNorm
decomposed vs LayerNormalization) runs in kiln and matches torch and ONNX Runtime. Opsets 18 to 20,
which torch 1.13 cannot export, are the opset-17 export upgraded by onnx's version converter (its
Reduce* nodes then take their axes as an input)."""
import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
import pytest

import kiln

OPSETS = range(9, 21)
CONVERTED = range(18, 21)  # from the opset-17 export
OUTPUTS = ("log_probs", "summary")


def model_path(opset_matrix, opset):
    path = opset_matrix / f"mixed_opset{opset}.onnx"
    if opset in CONVERTED:  # made again each time: the opset-17 export may have changed
        upgraded = onnx.version_converter.convert_version(onnx.load(str(opset_matrix / "mixed_opset17.onnx")), opset)
        onnx.checker.check_model(upgraded)
        onnx.save(upgraded, str(path))
    return str(path)


def test_each_opset_uses_its_own_spelling(opset_matrix):
    ops = {opset: {n.op_type for n in onnx.load(str(opset_matrix / f"mixed_opset{opset}.onnx")).graph.node}
           for opset in (9, 10, 17)}
    assert "Upsample" in ops[9] and "Resize" not in ops[9]
    assert "Resize" in ops[10]
    assert "LayerNormalization" in ops[17] and "LayerNormalization" not in ops[10]
    upgraded = onnx.load(model_path(opset_matrix, 18))
    assert upgraded.opset_import[0].version == 18
    assert all(len(n.input) == 2 for n in upgraded.graph.node if n.op_type == "ReduceMean")


@pytest.mark.parametrize("opset", OPSETS)
def test_opset_matches_torch_and_onnxruntime(opset_matrix, opset):
    path = model_path(opset_matrix, opset)
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
