"""Damaged plan files (a built plan truncated or with bytes flipped) and damaged input files (.npy
headers numpy refuses, data shorter than the header says, .pb files holding another message)."""
import os
import subprocess

import numpy as np
from onnx import TensorProto, helper

from case import Case
from model_builders import FLOAT, graph, info, model, save


def built_plan(d):
    """Builds Add(x, b) with x float[2x3] into d/model.kiln with the kiln under test ($KILN, set by the runner)."""
    g = graph([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [info("x", FLOAT, [2, 3])],
              [info("y", FLOAT, [2, 3])], [helper.make_tensor("b", FLOAT, [3], [1, 2, 3])])
    plan = d / "model.kiln"
    subprocess.run([os.environ["KILN"], "build", save(d, model(g)), "-o", plan], check=True, capture_output=True)
    return plan


def damaged_plan(damage, command="run"):
    def make(d):
        plan = built_plan(d)
        plan.write_bytes(damage(plan.read_bytes()))
        return [command, plan]
    return make


def flip(fraction):
    def damage(data):
        at = int(len(data) * fraction)
        return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
    return damage


def relu_with_input(write):
    """Relu on x float[2x3], x fed from the file `write(d)` returns."""
    def make(d):
        g = graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], [info("x", FLOAT, [2, 3])], [info("y")])
        return ["run", save(d, model(g)), "--input", f"x={write(d)}"]
    return make


def npy(header, data=bytes(24), name="x.npy"):
    """A version 1.0 .npy file with the header dict text `header` (padded as numpy pads it)."""
    def write(d):
        text = header.encode() + b" " * (63 - (10 + len(header)) % 64) + b"\n"
        (d / name).write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data)
        return d / name
    return write


def saved(array, cut=0):
    def write(d):
        np.save(d / "x.npy", array)
        if cut:
            (d / "x.npy").write_bytes((d / "x.npy").read_bytes()[:-cut])
        return d / "x.npy"
    return write


def pb(message):
    def write(d):
        (d / "x.pb").write_bytes(message.SerializeToString() if hasattr(message, "SerializeToString") else message)
        return d / "x.pb"
    return write


def header(shape, descr="<f4", order="False"):
    return f"{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}"


F23 = np.zeros((2, 3), np.float32)
CASES = [
    Case("plan-truncated-16-bytes", damaged_plan(lambda b: b[:16]), 1, ["model.kiln", "plan is truncated"]),
    Case("plan-truncated-half", damaged_plan(lambda b: b[: len(b) // 2]), 1, ["model.kiln", "plan is truncated"]),
    Case("plan-truncated-last-byte", damaged_plan(lambda b: b[:-1]), 1, ["model.kiln", "plan is truncated"]),
    Case("plan-truncated-inspect", damaged_plan(lambda b: b[: len(b) // 3], "inspect"), 1, ["model.kiln", "plan is truncated"]),
    Case("plan-magic-only", damaged_plan(lambda b: b[:8]), 1, ["model.kiln", "plan is truncated"]),
    Case("plan-byte-flipped-header", damaged_plan(flip(0.02)), 1, ["model.kiln", "plan checksum mismatch"]),
    Case("plan-byte-flipped-middle", damaged_plan(flip(0.5)), 1, ["model.kiln", "plan checksum mismatch"]),
    Case("plan-byte-flipped-end", damaged_plan(flip(0.99)), 1, ["model.kiln", "plan checksum mismatch"]),
    Case("plan-trailing-garbage", damaged_plan(lambda b: b + b"\0" * 100), 1, ["model.kiln", "plan is corrupted"]),
    Case("npy-bad-magic", relu_with_input(lambda d: (d / "x.npy").write_bytes(b"NOTNUMPY" * 8) and d / "x.npy"),
         1, ["x.npy: not an .npy file"]),
    Case("npy-data-short", relu_with_input(saved(F23, cut=4)), 1, ["x.npy: the file holds 20 bytes of data but shape 2x3"]),
    Case("npy-header-truncated", relu_with_input(lambda d: (d / "x.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\x00{'de")
                                                  and d / "x.npy"), 1, ["x.npy: truncated header"]),
    Case("npy-shape-negative", relu_with_input(npy(header("(-1, 3)"))), 1, ["x.npy: malformed .npy header", "non-negative integer"]),
    Case("npy-shape-fraction", relu_with_input(npy(header("(2.5, 3)"))), 1, ["x.npy: malformed .npy header"]),
    Case("npy-shape-1e12", relu_with_input(npy(header("(1000000000000,)"))), 1, ["x.npy: the file holds 24 bytes"]),
    Case("npy-shape-overflow", relu_with_input(npy(header("(4294967296, 4294967296)"))), 1, ["x.npy", "is too large"]),
    Case("npy-header-not-a-dict", relu_with_input(npy("['descr', '<f4']")), 1, ["x.npy: malformed .npy header", "expected '{'"]),
    Case("npy-header-missing-shape", relu_with_input(npy("{'descr': '<f4', 'fortran_order': False, }")), 1, ["x.npy", "the key 'shape' is missing"]),
    Case("npy-object-dtype", relu_with_input(npy(header("(2, 3)", descr="|O"))), 1, ["x.npy: unsupported .npy dtype '|O'"]),
    Case("npy-wrong-dtype-for-input", relu_with_input(saved(F23.astype(np.int32))), 1, ["input 'x' has type int32 but the model expects float32"]),
    Case("npy-wrong-shape-for-input", relu_with_input(saved(np.zeros((3, 2), np.float32))), 1, ["input 'x' has invalid dimensions"]),
    Case("pb-truncated", relu_with_input(pb(helper.make_tensor("x", FLOAT, [2, 3], [0] * 6).SerializeToString()[:-5])),
         1, ["input 'x'", "x.pb holds no TensorProto"]),
    Case("pb-sequence-for-tensor", relu_with_input(pb(helper.make_sequence(
        "x", 1, [helper.make_tensor("t", FLOAT, [2, 3], [0] * 6)]))), 1, ["x.pb", "SequenceProto"]),
    Case("pb-tensor-data-short", relu_with_input(pb(TensorProto(name="x", data_type=FLOAT, dims=[2, 3],
                                                                float_data=[1, 2]))), 1, ["input 'x'", "float_data holds 2 values but shape 2x3 needs 6"]),
]
