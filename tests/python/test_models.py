"""Check kiln's outputs against ONNX Runtime on models exported from PyTorch.

The models come from tests/models/export_models.py, run under Debian's
/usr/bin/python3 (which has torch) into <build>/models; existing files are
reused, so only the first run pays for the export.

Tolerance: an output element passes when
    |kiln - ort| <= RTOL * |ort| + ATOL
with RTOL = 1e-4 and ATOL = 1e-4 * max(|ort|) over that output. That is a
relative error of at most 1e-4 wherever the expected value is not near zero,
and an absolute error of 1e-4 of the output's scale where it is (values
near zero carry no meaningful relative error after cancellation).
"""
import json
import subprocess
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
import pytest

RTOL = 1e-4
ATOL_FRACTION = 1e-4
KILN_TIMEOUT_S = 300
BERT_VOCAB = 30522


@dataclass(frozen=True)
class Case:
    model: str
    dims: dict = field(default_factory=dict)  # values of the graph's symbolic dimensions
    inputs: dict = field(default_factory=dict)  # input name -> make(rng, shape); default random_floats


def random_floats(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def token_ids(rng, shape):
    return rng.integers(0, BERT_VOCAB, shape, dtype=np.int64)


def padded_mask(rng, shape):
    """All ones, except the second half of the last sequence is padding."""
    mask = np.ones(shape, dtype=np.int64)
    mask[-1, shape[-1] // 2 :] = 0
    return mask


def constant(*values):
    array = np.array(values, dtype=np.float32)
    return lambda rng, shape: array


def case(model, case_id=None, heavy=False, **fields):
    marks = [pytest.mark.heavy] if heavy else []
    return pytest.param(Case(model, **fields), id=case_id or model, marks=marks)


CASES = [
    case("resnet50", dims={"batch": 1}),
    case("resnet50", "resnet50_batch2", dims={"batch": 2}),
    case("mobilenet_v2"),
    case("mobilenet_v3_small"),
    case("efficientnet_b0"),
    case("shufflenet_v2_x1_0"),
    case("squeezenet1_1"),
    case("convnext_tiny", heavy=True),
    case("vit_b_16", heavy=True),
    case("deeplabv3_mobilenet_v3_large", heavy=True),
    case(
        "bert_encoder",
        dims={"batch": 2, "seq": 16},
        inputs={"input_ids": token_ids, "attention_mask": padded_mask},
    ),
    case("lstm", dims={"seq": 10}),
    case("gru", dims={"seq": 10}),
    case("srcnn"),
    case(
        "srcnn_dynamic",
        "srcnn_dynamic_x3",
        dims={"height": 256, "width": 256},
        inputs={"factor": constant(1, 1, 3, 3)},
    ),
    case(
        "srcnn_dynamic",
        "srcnn_dynamic_x4_small",
        dims={"height": 64, "width": 64},
        inputs={"factor": constant(1, 1, 4, 4)},
    ),
]


def selected_models(session):
    """Names of the models used by the test cases pytest selected to run."""
    params = (item.callspec.params for item in session.items if hasattr(item, "callspec"))
    return sorted({p["case"].model for p in params if isinstance(p.get("case"), Case)})


@pytest.fixture(scope="session")
def models_dir(request, model_exporter):
    """Export (or reuse) the models the selected tests need; returns the directory holding them."""
    return model_exporter(selected_models(request.session))


def make_inputs(case, graph_inputs):
    rng = np.random.default_rng(0)
    feeds = {}
    for graph_input in graph_inputs:
        shape = [case.dims[dim] if isinstance(dim, str) else dim for dim in graph_input.shape]
        make = case.inputs.get(graph_input.name, random_floats)
        feeds[graph_input.name] = make(rng, shape)
    return feeds


def run_onnxruntime(session, feeds):
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def run_kiln(kiln, model, feeds, workdir):
    """Run `kiln run` on `feeds`; returns {output name: array} as listed in its outputs.json."""
    command = [str(kiln), "run", str(model)]
    for index, (name, array) in enumerate(feeds.items()):
        path = workdir / f"input{index}.npy"
        np.save(path, array)
        command += ["--input", f"{name}={path}"]
    out_dir = workdir / "outputs"
    out_dir.mkdir()
    command += ["--output-dir", str(out_dir)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kiln timed out after {KILN_TIMEOUT_S} s: {' '.join(command)}", pytrace=False)
    if result.returncode != 0:
        reason = f"kiln exited with {result.returncode}: {result.stderr.strip()}"
        pytest.fail(f"{reason}\ncommand: {' '.join(command)}", pytrace=False)
    return load_outputs(out_dir)


def load_outputs(out_dir):
    manifest = json.loads((out_dir / "outputs.json").read_text())
    outputs = {}
    for entry in manifest["outputs"]:
        array = np.load(out_dir / entry["file"])
        assert [list(array.shape), str(array.dtype)] == [entry["shape"], entry["dtype"]], (
            f"outputs.json says {entry}, but {entry['file']} holds {array.dtype}{list(array.shape)}"
        )
        outputs[entry["name"]] = array
    return outputs


def mismatch(name, got, expected):
    """Describe how `got` differs from `expected` beyond the tolerance, or return None if it does not."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return f"{name}: got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if expected.size == 0:
        return None
    got, expected = got.astype(np.float64), expected.astype(np.float64)
    magnitude = np.abs(expected)
    atol = ATOL_FRACTION * magnitude.max()
    error = np.nan_to_num(np.abs(got - expected), nan=np.inf)
    bad = ~(error <= RTOL * magnitude + atol)  # also true where expected is NaN
    if not bad.any():
        return None
    relative = np.divide(error, magnitude, out=np.zeros_like(error), where=magnitude > atol)
    lines = [f"{name}: {bad.sum()} of {bad.size} elements out of tolerance (atol {atol:.3g})"]
    lines.append(describe_worst("abs", error, got, expected))
    if relative.max() > 0:  # else every erring element is near zero, where relative error means nothing
        lines.append(describe_worst("rel", relative, got, expected))
    return "\n".join(lines)


def describe_worst(label, measure, got, expected):
    where = tuple(int(i) for i in np.unravel_index(np.argmax(measure), measure.shape))
    return f"  max {label} error {measure[where]:.3g} at {where}: got {got[where]:.7g}, expected {expected[where]:.7g}"


@pytest.mark.parametrize("case", CASES)
def test_matches_onnxruntime(case, kiln, models_dir, tmp_path):
    model = models_dir / f"{case.model}.onnx"
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = make_inputs(case, session.get_inputs())
    expected = run_onnxruntime(session, feeds)
    got = run_kiln(kiln, model, feeds, tmp_path)
    assert sorted(got) == sorted(expected), f"kiln wrote outputs {sorted(got)}; the model has {sorted(expected)}"
    problems = [mismatch(name, got[name], expected[name]) for name in expected]
    problems = [problem for problem in problems if problem]
    if problems:
        pytest.fail("kiln differs from ONNX Runtime:\n" + "\n".join(problems), pytrace=False)
