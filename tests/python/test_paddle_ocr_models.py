"""Trained models that paddle2onnx exported, as a PyPI package ships them: rapidocr-onnxruntime's
PaddleOCR PP-OCRv4 text detector (DBNet: Conv, ConvTranspose, Resize, HardSigmoid; any height and
width), PP-OCRv4 recognizer (SVTR-LCNet: Conv blocks, then attention spelled in MatMul, Softmax,
ReduceMean, Pow and Sqrt over a dynamic width) and mobile v2.0 direction classifier, each run by
kiln and by onnxruntime on the same synthetic page of glyph-like strokes (text enough for the
detector to find and the recognizer to read something), through a Session and through a plan.

The wheel is read as an archive, not installed (its dependencies pin numpy < 2): scripts/setup
downloads it with hash checking (scripts/model-wheels.lock)."""
import pathlib
import subprocess
import zipfile

import numpy as np
import onnx
import onnxruntime
import pytest

import kiln

WHEEL = pathlib.Path(__file__).resolve().parents[2] / ".venv" / "model-wheels" / "rapidocr_onnxruntime-1.3.24-py3-none-any.whl"
MODELS = {"det": "ch_PP-OCRv4_det_infer.onnx", "rec": "ch_PP-OCRv4_rec_infer.onnx", "cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx"}
# Of probabilities in [0, 1]. onnxruntime's own outputs move by up to 2.8e-5 (detector) and 8.2e-5
# (recognizer) between its ORT_DISABLE_ALL and ORT_ENABLE_ALL levels on these inputs; kiln's fused
# layers (LayerNorm, attention's MatMul + Softmax) round differently again, by up to 4.7e-5 and
# 3.2e-4 (the recognizer's sharp 6625-way softmax amplifies its logits' rounding).
TOLERANCE = {"det": 1e-4, "rec": 1e-3, "cls": 1e-4}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The three models, extracted from the wheel into a temporary folder."""
    assert WHEEL.is_file(), f"{WHEEL} is missing: run scripts/setup (scripts/model-wheels.lock)"
    folder = tmp_path_factory.mktemp("ppocr")
    with zipfile.ZipFile(WHEEL) as wheel:
        for key, name in MODELS.items():
            (folder / name).write_bytes(wheel.read(f"rapidocr_onnxruntime/models/{name}"))
    return {key: folder / name for key, name in MODELS.items()}


def page(height, width, seed=0):
    """A white RGB page with lines of dark glyph-like strokes (uint8, HWC)."""
    rng = np.random.default_rng(seed)
    image = np.full((height, width, 3), 255, np.uint8)
    for top in range(height // 16, height - 30, 40):
        x = 20
        while x < width - 40:
            w = int(rng.integers(6, 14))
            for y0, y1, x0, x1 in ((0, 16, 0, 2), (0, 2, 0, w), (7, 9, 0, w), (14, 16, 0, w)):
                image[top + y0:top + y1, x + x0:x + x1] = 0
            x += w + int(rng.integers(3, 6)) + (20 if rng.random() < 0.1 else 0)
    return image


def detector_input(image):
    """rapidocr's detector preprocessing: ImageNet mean and std, NCHW."""
    x = (image / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    return x.transpose(2, 0, 1)[None].astype(np.float32)


def line_input(image):
    """rapidocr's recognizer / classifier preprocessing of text lines: (x / 255 - 0.5) / 0.5, NCHW."""
    return ((image / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2).astype(np.float32)


def lines(count, width, seed):
    """`count` text-line images 48 high (the recognizer's height), one line of glyphs each."""
    return np.stack([page(48, width, seed + i) for i in range(count)])


def onnxruntime_run(model, x):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_the_models_are_paddle2onnx_exports(models):
    for key in MODELS:
        m = onnx.load(models[key])
        assert m.graph.input[0].name == "x"
        assert {"Conv", "BatchNormalization", "HardSigmoid"} <= {n.op_type for n in m.graph.node}
    assert onnx.load(models["cls"]).producer_name == "PaddlePaddle"
    assert {"ConvTranspose", "Resize"} <= {n.op_type for n in onnx.load(models["det"]).graph.node}


@pytest.mark.parametrize("height,width", [(320, 480), (256, 640)])
def test_text_detector_matches_onnxruntime(models, height, width):
    x = detector_input(page(height, width))
    expected = onnxruntime_run(models["det"], x)
    assert (expected > 0.3).mean() > 0.05  # the page has text to find
    got = kiln.InferenceSession(str(models["det"])).run(None, {"x": x})[0]
    assert got.shape == expected.shape == (1, 1, height, width)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE["det"], rtol=0)


@pytest.mark.parametrize("width", [160, 320])
def test_text_recognizer_matches_onnxruntime(models, width):
    x = line_input(lines(2, width, seed=1))
    expected = onnxruntime_run(models["rec"], x)
    got = kiln.InferenceSession(str(models["rec"])).run(None, {"x": x})[0]
    assert got.shape == expected.shape == (2, width // 8, 6625)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE["rec"], rtol=0)
    characters = expected.argmax(-1)
    assert (characters != 0).any()  # it reads something (index 0 is CTC's blank)
    np.testing.assert_array_equal(got.argmax(-1), characters)


def test_direction_classifier_matches_onnxruntime(models):
    x = line_input(np.concatenate([lines(2, 192, seed=3), lines(1, 192, seed=5)[:, ::-1, ::-1]]))
    expected = onnxruntime_run(models["cls"], x)
    got = kiln.InferenceSession(str(models["cls"])).run(None, {"x": x})[0]
    assert got.shape == expected.shape == (3, 2)
    np.testing.assert_allclose(got, expected, atol=TOLERANCE["cls"], rtol=0)


def test_text_detector_through_a_plan_matches_onnxruntime(models, kiln, tmp_path):
    """A plan with a profile over page sizes, run at a size between its bounds."""
    plan = tmp_path / "det.plan"
    built = subprocess.run([str(kiln), "build", str(models["det"]), "-o", str(plan), "--min-shapes", "x:1x3x160x160",
                            "--opt-shapes", "x:1x3x320x480", "--max-shapes", "x:1x3x640x640"],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    x = detector_input(page(288, 416))
    np.save(tmp_path / "x.npy", x)
    ran = subprocess.run([str(kiln), "run", str(plan), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    (output,) = (tmp_path / "out").glob("*.npy")
    np.testing.assert_allclose(np.load(output), onnxruntime_run(models["det"], x), atol=TOLERANCE["det"], rtol=0)
