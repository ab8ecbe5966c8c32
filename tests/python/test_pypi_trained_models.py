"""Trained models as PyPI packages ship them, run by kiln and by onnxruntime, and the packages
themselves (written for onnxruntime) run with kiln in onnxruntime's place.

magika (Google's file-type detector, pinned in scripts/requirements.lock) ships a Keras model that
tf2onnx 1.16 converted: int32 byte tokens [N, 2048] -> probabilities over its content types
[N, 214], through tf2onnx's patterns (NHWC Transposes around Conv, Shape/Slice/Concat
arithmetic feeding Reshape, an Expand, a LayerNorm spelled out in ReduceSum/Sqrt/Reciprocal).

onnxruntime's own result changes with the batch (row 1 of the files below by 1.3e-4 between a
batch of 7 and a batch of 1), while kiln's rows do not, so each row is compared with onnxruntime's
run of that row alone."""
import json
import pathlib
import subprocess
import sys
import textwrap
import zipfile
import zlib

import numpy as np
import onnx
import onnxruntime
import pytest

import kiln

magika = pytest.importorskip("magika")

MODEL = next((pathlib.Path(magika.__file__).parent / "models").glob("*/model.onnx"))
TOLERANCE = 2e-5  # of probabilities in [0, 1]


def sample_files(folder):
    """Files of common types, written here so that the test depends on nothing else."""
    folder.mkdir(exist_ok=True)
    (folder / "tool.py").write_text("import os\n\n\ndef main():\n    print(os.getcwd())\n\n\nif __name__ == '__main__':\n    main()\n")
    (folder / "config.json").write_text('{"name": "kiln", "layers": [1, 2, 3], "fast": true, "nested": {"a": null}}\n')
    (folder / "hello.c").write_text("#include <stdio.h>\n\nint main(void) {\n  printf(\"hello\\n\");\n  return 0;\n}\n")
    (folder / "page.html").write_text("<!DOCTYPE html>\n<html><head><title>t</title></head><body><p>Hello</p></body></html>\n")
    (folder / "run.sh").write_text("#!/bin/sh\nset -e\nfor f in *.txt; do\n  wc -l \"$f\"\ndone\n")
    (folder / "notes.md").write_text("# Notes\n\n- one\n- two\n\nSome *text* with a [link](https://example.org).\n")
    with zipfile.ZipFile(folder / "archive.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", "some text " * 200)
    raw = b"".join(b"\x00" + bytes(range(48)) for _ in range(16))  # a 16x16 RGB PNG
    png = b"\x89PNG\r\n\x1a\n"
    for kind, body in ((b"IHDR", (16).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"), (b"IDAT", zlib.compress(raw)), (b"IEND", b"")):
        png += len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")
    (folder / "image.png").write_bytes(png)
    return sorted(folder.iterdir())


def magika_features(paths):
    """The model inputs magika computes for these files (what its session.run receives)."""
    captured = []
    run = onnxruntime.InferenceSession.run

    def capture(self, names, feeds, *args):
        captured.append(np.asarray(feeds["bytes"], dtype=np.int32))
        return run(self, names, feeds, *args)

    onnxruntime.InferenceSession.run = capture
    try:
        magika.Magika().identify_paths(paths)
    finally:
        onnxruntime.InferenceSession.run = run
    return np.concatenate(captured)


def row_by_row(session, x):
    return np.concatenate([session.run(None, {"bytes": x[i:i + 1]})[0] for i in range(len(x))])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    files = magika_features(sample_files(tmp_path_factory.mktemp("magika") / "files"))
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 257, size=(4, files.shape[1])).astype(np.int32)  # 256 is magika's padding token
    noise[2:, 1000:] = 256
    return np.concatenate([files, noise])


def test_the_model_is_a_tf2onnx_export():
    model = onnx.load(MODEL)
    assert model.producer_name == "tf2onnx"
    ops = {n.op_type for n in model.graph.node}
    assert {"Transpose", "Conv", "Shape", "Slice", "Expand", "ReduceSum", "Reciprocal"} <= ops


def test_magika_model_matches_onnxruntime(inputs):
    expected = row_by_row(onnxruntime.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"]), inputs)
    session = kiln.InferenceSession(str(MODEL))
    batched = session.run(None, {"bytes": inputs})[0]
    assert batched.shape == expected.shape == (len(inputs), 214)
    np.testing.assert_allclose(batched, expected, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(row_by_row(session, inputs), expected, atol=TOLERANCE, rtol=0)
    assert (batched.argmax(1) == expected.argmax(1)).all()


def test_magika_model_through_a_plan_matches_onnxruntime(inputs, kiln, tmp_path):
    plan = tmp_path / "magika.plan"
    built = subprocess.run([str(kiln), "build", str(MODEL), "-o", str(plan), "--min-shapes", "bytes:1x2048",
                            "--opt-shapes", "bytes:4x2048", "--max-shapes", f"bytes:{len(inputs)}x2048"],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    np.save(tmp_path / "bytes.npy", inputs)
    ran = subprocess.run([str(kiln), "run", str(plan), "--input", f"bytes={tmp_path / 'bytes.npy'}",
                          "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    expected = row_by_row(onnxruntime.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"]), inputs)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "target_label.npy"), expected, atol=TOLERANCE, rtol=0)


IDENTIFY = textwrap.dedent("""
    import json, pathlib, sys
    if sys.argv[1] == "kiln":
        import kiln
        sys.modules["onnxruntime"] = kiln  # what a user does to run an onnxruntime package on kiln
    import magika
    results = magika.Magika().identify_paths(sorted(pathlib.Path(sys.argv[2]).iterdir()))
    print(json.dumps([[r.path.name, str(r.output.label), r.prediction.score] for r in results]))
""")


def test_magika_itself_runs_on_kiln_in_place_of_onnxruntime(tmp_path):
    """magika's own code (session options, providers, telemetry switch, a run fed lists of lists)
    on kiln gives the labels it gives on onnxruntime, with scores within onnxruntime's own
    batch-to-batch difference."""
    files = tmp_path / "files"
    sample_files(files)
    results = {}
    for engine in ("onnxruntime", "kiln"):
        done = subprocess.run([sys.executable, "-c", IDENTIFY, engine, str(files)], capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        results[engine] = done.stdout.strip().splitlines()[-1]
    ort, ours = json.loads(results["onnxruntime"]), json.loads(results["kiln"])
    assert [r[:2] for r in ours] == [r[:2] for r in ort]
    assert {r[1] for r in ort} >= {"python", "c", "html", "zip", "png"}
    np.testing.assert_allclose([r[2] for r in ours], [r[2] for r in ort], atol=1e-3, rtol=0)
