"""Comparing kiln's outputs with ONNX Runtime's on the same inputs.

The test is a relative plus an absolute tolerance, numpy.allclose style, per output:

    |kiln - ort| <= tolerance x (|ort| + near_zero x max|ort|)

i.e. a relative error of `tolerance` (1e-4) for elements away from zero, and near zero an absolute
error of `tolerance` times the output's magnitude (near_zero = 1: its largest element). The reported
error is max |kiln - ort| / (|ort| + near_zero x max|ort|), so an output passes when it is <= 1e-4.
A purely element-wise relative error is not usable: elements that are sums cancelling to near zero
carry the rounding of their large terms (ORT's own optimized and unoptimized graphs differ by 7e-3
relative on ResNet-50 elements of 1e-3 of the output's range, but by 1.7e-5 of the range).
Also reported, for information: the largest relative error over elements >= 10 % of max|ort|.
"""
import json
import pathlib
import subprocess
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

RELATIVE_TOLERANCE = 1e-4
NEAR_ZERO = 1.0


@dataclass
class OutputError:
    name: str
    max_error: float  # the tolerance measure described above
    max_abs_error: float
    max_abs_reference: float
    problem: str = ""  # shape/dtype mismatch or non-finite values
    max_relative_large: float = 0.0  # largest relative error over elements >= 10 % of max|ort|

    def passed(self, tolerance=RELATIVE_TOLERANCE):
        return not self.problem and self.max_error <= tolerance


def compare(name, got, want, near_zero=NEAR_ZERO):
    if got.shape != want.shape:
        return OutputError(name, float("inf"), float("inf"), 0.0, f"shape {got.shape} != ORT's {want.shape}")
    if got.dtype.kind in "iub":
        wrong = int(np.count_nonzero(got != want))
        return OutputError(name, float(wrong), float(wrong), 0.0, f"{wrong} elements differ" if wrong else "")
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(got)) and not np.array_equal(np.isfinite(got), np.isfinite(want)):
        return OutputError(name, float("inf"), float("inf"), 0.0, "non-finite values where ORT has finite ones")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    if scale == 0.0:  # all zeros: any difference is an error
        error = float(np.max(np.abs(got))) if got.size else 0.0
        return OutputError(name, error, error, 0.0)
    diff = np.abs(got - want)
    error = float(np.max(diff / (np.abs(want) + near_zero * scale)))
    large = np.abs(want) >= 0.1 * scale
    relative_large = float(np.max(diff[large] / np.abs(want[large])))
    return OutputError(name, error, float(np.max(diff)), scale, max_relative_large=relative_large)


def ort_outputs(model_path, input_files):
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    feeds = {name: np.load(path) for name, path in input_files.items()}
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def kiln_outputs(kiln, model_path, input_files, out_dir):
    out_dir = pathlib.Path(out_dir)
    command = [str(kiln), "run", str(model_path), "--threads", "1", "--output-dir", str(out_dir)]
    command += [f"--input={name}={path}" for name, path in input_files.items()]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"kiln run failed (exit {result.returncode}): {' '.join(command)}\n{result.stderr}")
    manifest = json.loads((out_dir / "outputs.json").read_text())
    return {entry["name"]: np.load(out_dir / entry["file"]) for entry in manifest["outputs"]}


def check_model(kiln, model_path, input_files, work_dir, near_zero=NEAR_ZERO):
    """One OutputError per ORT output (a missing kiln output is a problem)."""
    want = ort_outputs(model_path, input_files)
    got = kiln_outputs(kiln, model_path, input_files, work_dir)
    errors = []
    for name, reference in want.items():
        if name not in got:
            errors.append(OutputError(name, float("inf"), float("inf"), 0.0, "kiln did not produce it"))
        else:
            errors.append(compare(name, got[name], reference, near_zero))
    return errors
