"""Every dtype `kiln ops` claims for an operator below really works: for each op in CASES and each
dtype its (first) type variable lists, a single-node model runs through `kiln run` and is compared
with onnx.reference.ReferenceEvaluator. Ops that need hand-made inputs (RNNs, RoiAlign, ...) are
covered by the ONNX conformance suite instead (tests/conformance)."""
import json
import re
import subprocess

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

FAMILIES = [
    ["float16", "float32", "float64"],
    ["int8", "int16", "int32", "int64"],
    ["uint8", "uint16", "uint32", "uint64"],
]
NPY_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool", "string"}


def expand(text):
    """'float16..float64, bfloat16, int8' -> the dtype names (see the legend of docs/operators.md)."""
    out = []
    for part in [p.strip() for p in text.split(",") if p.strip()]:
        if part == "float8_*":
            out += ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]
        elif ".." in part:
            first, last = part.split("..")
            family = next(f for f in FAMILIES if first in f)
            out += family[family.index(first) : family.index(last) + 1]
        else:
            out.append(part)
    return out


@pytest.fixture(scope="session")
def claims(kiln):
    """{op: {type variable: [dtype, ...]}} from `kiln ops --markdown` (ai.onnx ops only)."""
    r = subprocess.run([str(kiln), "ops", "--markdown"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    result = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 6 or cells[0] != "ai.onnx" or "not checked" in cells[4] or cells[4].startswith("fixed"):
            continue
        variables = {}
        for part in cells[4].split("; "):
            name, _, types = part.rpartition(": ")
            variables[name or "T"] = expand(types)
        result[cells[1]] = variables
    return result


def np_dtype(name):
    if name == "string":
        return np.dtype(object)
    return np.dtype(name) if name in NPY_DTYPES else np.dtype(getattr(ml_dtypes, name))


def onnx_type(name):
    if name == "string":
        return onnx.TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(np_dtype(name))


def X(dtype, shape, rng, **kw):
    """An input of the dtype under test."""
    return values(dtype, shape, rng, **kw), dtype


def I64(v):
    """An int64 input (indices, axes, shapes)."""
    return np.array(v, dtype=np.int64), "int64"


def values(dtype, shape, rng, low=1, high=5, positive_floats=(0.1, 0.9)):
    """Inputs that every op below handles in every dtype: small positive ints, floats in a range
    exactly representable after rounding, random bools and short strings."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "string":
        return np.array(["a", "bc", "def", "", "xyz", "q"] * 10, dtype=object)[: int(np.prod(shape))].reshape(shape)
    if dtype.startswith(("int", "uint")):
        if dtype in ("int2", "uint2", "int4", "uint4"):
            low, high = 0, 1
        return rng.integers(low, high + 1, shape).astype(np_dtype(dtype))
    lo, hi = positive_floats
    return rng.uniform(lo, hi, shape).astype(np.float32).astype(np_dtype(dtype))


def write_input(path_stem, name, array, dtype):
    if dtype in NPY_DTYPES:
        path = path_stem.with_suffix(".npy")
        np.save(path, array.astype(str) if dtype == "string" else array)
    else:
        path = path_stem.with_suffix(".pb")
        path.write_bytes(numpy_helper.from_array(array, name).SerializeToString())
    return path


def run_kiln(kiln, model_path, feeds, out_dir):
    args = [str(kiln), "run", str(model_path), "--output-dir", str(out_dir)]
    for name, file in feeds.items():
        args += ["--input", f"{name}={file}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    outs = []
    for entry in json.loads((out_dir / "outputs.json").read_text())["outputs"]:
        file = out_dir / entry["file"]
        if entry["format"] == "npy":
            outs.append(np.load(file, allow_pickle=False))
        else:
            t = onnx.TensorProto()
            t.ParseFromString(file.read_bytes())
            outs.append(numpy_helper.to_array(t))
    return outs, None


# kiln and the reference differ by ~4e-5 relative on LRN (ONNX's own LRN tests allow 1e-3).
OP_TOLERANCE = {"LRN": 1e-4}


def tolerance(dtype, op=None):
    # float64: kiln computes Erf and Gelu in float32 (relative error ~3e-8).
    return max({"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-7}.get(dtype, 0.1),
               OP_TOLERANCE.get(op, 0))


def compare(got, want, dtype, op=None):
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "OU":
            # The reference pads/masks strings with the number 0 where ONNX means the empty string.
            w = np.array(["" if isinstance(x, (int, np.integer)) and x == 0 else x for x in w.ravel()], dtype=object).reshape(w.shape)
            assert g.astype(str).tolist() == w.astype(str).tolist(), f"{g.tolist()} != {w.tolist()}"
            continue
        assert g.dtype == w.dtype, f"dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            tol = tolerance("float32" if isinstance(w, Float32Reference) else dtype, op)
            np.testing.assert_allclose(g.astype(np.float64), np.asarray(w).astype(np.float64), rtol=tol, atol=tol)


# Each case: op -> (opset, make(dtype, rng) -> (node, {input: (array, dtype)}, extra initializers)).
def unary(op, lo=0.1, hi=0.9, **attrs):
    def make(dt, rng):
        return helper.make_node(op, ["x"], ["y"], **attrs), {"x": X(dt, [2, 3], rng, positive_floats=(lo, hi))}

    return make


def nary(op, n=2, **attrs):
    def make(dt, rng):
        names = [f"x{i}" for i in range(n)]
        shapes = [[2, 3], [3]] + [[2, 3]] * (n - 2)
        return helper.make_node(op, names, ["y"], **attrs), {k: X(dt, s, rng) for k, s in zip(names, shapes)}

    return make


def with_ints(op, int_inputs, **attrs):
    """x plus int64 inputs (indices, axes, shapes) given as graph inputs."""

    def make(dt, rng):
        names = ["x"] + list(int_inputs)
        feeds = {"x": X(dt, [2, 3, 4], rng)}
        feeds.update({k: I64(v) for k, v in int_inputs.items()})
        return helper.make_node(op, names, ["y"], **attrs), feeds

    return make


def where(dt, rng):
    return helper.make_node("Where", ["c", "a", "b"], ["y"]), {
        "c": (rng.integers(0, 2, [2, 3]).astype(bool), "bool"), "a": X(dt, [2, 3], rng), "b": X(dt, [3], rng)}


def gather_elements(dt, rng):
    return helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1), {
        "x": X(dt, [2, 3], rng), "i": I64([[0, 2], [1, 0]])}


def scatter_elements(dt, rng):
    return helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1), {
        "x": X(dt, [2, 3], rng), "i": I64([[0, 2], [1, 0]]), "u": X(dt, [2, 2], rng)}


def concat(dt, rng):
    return helper.make_node("Concat", ["a", "b"], ["y"], axis=1), {"a": X(dt, [2, 3], rng), "b": X(dt, [2, 1], rng)}


def split(dt, rng):
    return helper.make_node("Split", ["x", "s"], ["y0", "y1"], axis=1), {
        "x": X(dt, [2, 5], rng), "s": I64([2, 3])}


def bitshift(dt, rng):
    return helper.make_node("BitShift", ["x", "s"], ["y"], direction="LEFT"), {
        "x": X(dt, [2, 3], rng), "s": X(dt, [3], rng, low=0, high=2)}


def inputs_of(op, shapes, **attrs):
    """op over inputs x0, x1, ... of the dtype under test with the given shapes."""

    def make(dt, rng):
        names = [f"x{i}" for i in range(len(shapes))]
        return helper.make_node(op, names, ["y"], **attrs), {k: X(dt, sh, rng) for k, sh in zip(names, shapes)}

    return make


def topk(dt, rng):
    return helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1), {"x": X(dt, [2, 5], rng), "k": I64([2])}


def gather_nd(dt, rng):
    return helper.make_node("GatherND", ["x", "i"], ["y"]), {"x": X(dt, [2, 3], rng), "i": I64([[1, 2], [0, 0]])}


def scatter_nd(dt, rng):
    return helper.make_node("ScatterND", ["x", "i", "u"], ["y"]), {
        "x": X(dt, [2, 3], rng), "i": I64([[1, 2], [0, 0]]), "u": X(dt, [2], rng)}


def compress(dt, rng):
    return helper.make_node("Compress", ["x", "c"], ["y"], axis=1), {
        "x": X(dt, [2, 3], rng), "c": (np.array([True, False, True]), "bool")}


CASES = {
    **{op: (18, unary(op)) for op in [
        "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Softplus", "Softsign", "Floor", "Ceil",
        "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "LeakyRelu",
        "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "ThresholdedRelu", "Mish", "Relu", "Neg", "Abs",
        "Sign", "Shrink", "IsNaN", "IsInf", "Not", "BitwiseNot", "Identity", "Shape", "Size", "NonZero"]},
    "Acosh": (18, unary("Acosh", 1.1, 1.9)),
    "Gelu": (20, unary("Gelu")),
    "Softmax": (13, unary("Softmax")),
    "LogSoftmax": (13, unary("LogSoftmax")),
    "Hardmax": (13, unary("Hardmax")),
    "Transpose": (18, unary("Transpose", perm=[1, 0])),
    "Flatten": (18, unary("Flatten", axis=1)),
    "Trilu": (18, unary("Trilu")),
    "DepthToSpace": (18, lambda dt, rng: (helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2),
                                          {"x": X(dt, [1, 4, 2, 3], rng)})),
    "SpaceToDepth": (18, lambda dt, rng: (helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2),
                                          {"x": X(dt, [1, 1, 4, 2], rng)})),
    **{op: (18, nary(op)) for op in [
        "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
        "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu"]},
    "BitShift": (18, bitshift),
    "Where": (18, where),
    **{op: (18, with_ints(op, {"axes": [1]}, keepdims=1)) for op in [
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare"]},
    "ArgMax": (18, unary("ArgMax", axis=1)),
    "ArgMin": (18, unary("ArgMin", axis=1)),
    "CumSum": (18, with_ints("CumSum", {"axis": 1})),
    "Gather": (18, with_ints("Gather", {"i": [2, 0, 1]}, axis=1)),
    "GatherElements": (18, gather_elements),
    "ScatterElements": (18, scatter_elements),
    "Slice": (18, with_ints("Slice", {"starts": [1], "ends": [3], "axes": [1]})),
    "Reshape": (18, with_ints("Reshape", {"shape": [4, 6]})),
    "Squeeze": (18, lambda dt, rng: (helper.make_node("Squeeze", ["x", "axes"], ["y"]),
                                     {"x": X(dt, [2, 1, 3], rng), "axes": I64([1])})),
    "Unsqueeze": (18, with_ints("Unsqueeze", {"axes": [0]})),
    "Expand": (18, with_ints("Expand", {"shape": [2, 2, 3, 4]})),
    "Tile": (18, with_ints("Tile", {"repeats": [1, 2, 1]})),
    "Pad": (18, with_ints("Pad", {"pads": [0, 1, 0, 0, 1, 0]})),
    "Concat": (18, concat),
    "MatMul": (18, inputs_of("MatMul", [[2, 3], [3, 2]])),
    "Gemm": (18, inputs_of("Gemm", [[2, 3], [3, 2], [2]])),
    "Conv": (18, inputs_of("Conv", [[1, 2, 4, 4], [3, 2, 2, 2], [3]])),
    "ConvTranspose": (18, inputs_of("ConvTranspose", [[1, 2, 3, 3], [2, 3, 2, 2], [3]])),
    "AveragePool": (19, inputs_of("AveragePool", [[1, 2, 4, 4]], kernel_shape=[2, 2])),
    "MaxPool": (18, inputs_of("MaxPool", [[1, 2, 4, 4]], kernel_shape=[2, 2])),
    "GlobalAveragePool": (18, inputs_of("GlobalAveragePool", [[1, 2, 4, 4]])),
    "GlobalMaxPool": (18, inputs_of("GlobalMaxPool", [[1, 2, 4, 4]])),
    "LpPool": (18, inputs_of("LpPool", [[1, 2, 4, 4]], kernel_shape=[2, 2])),
    "InstanceNormalization": (18, inputs_of("InstanceNormalization", [[1, 2, 3, 3], [2], [2]])),
    "LayerNormalization": (18, inputs_of("LayerNormalization", [[2, 3, 4], [4], [4]])),
    "BatchNormalization": (15, inputs_of("BatchNormalization", [[1, 2, 3, 3], [2], [2], [2], [2]])),
    "LpNormalization": (18, inputs_of("LpNormalization", [[2, 3]])),
    "LRN": (18, inputs_of("LRN", [[1, 3, 2, 2]], size=3)),
    "MeanVarianceNormalization": (18, inputs_of("MeanVarianceNormalization", [[1, 2, 3, 3]])),
    "Einsum": (18, inputs_of("Einsum", [[2, 3], [3, 2]], equation="ij,jk->ik")),
    "Clip": (18, inputs_of("Clip", [[2, 3], [], []])),
    "Det": (18, inputs_of("Det", [[2, 2, 2]])),
    "EyeLike": (18, unary("EyeLike")),
    "TopK": (18, topk),
    "GatherND": (18, gather_nd),
    "ScatterND": (18, scatter_nd),
    "Compress": (18, compress),
    "Dropout": (22, unary("Dropout")),
    "Unique": (18, unary("Unique", sorted=1)),
    "Resize": (19, lambda dt, rng: (helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest"),
                                    {"x": X(dt, [1, 1, 2, 3], rng), "scales": (np.array([1, 1, 2, 2], np.float32), "float32")})),
    "ReverseSequence": (18, lambda dt, rng: (helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0),
                                             {"x": X(dt, [3, 2], rng), "lens": I64([2, 3])})),
    "Split": (18, split),
}


# Ops whose output has the input's type, where the reference widens some (int32 -> int64 sums,
# bfloat16 -> float64 determinants).
SAME_TYPE_OUTPUT = {"ReduceSumSquare", "ReduceSum", "ReduceProd", "Det"}


class Float32Reference(np.ndarray):
    """A float64 reference value computed in float32: compared with float32's tolerance."""

    def __new__(cls, value):
        return np.asarray(value).view(cls)


def reference(model, feeds, dt, node):
    """ReferenceEvaluator's outputs. Where it cannot run a dtype (MaxPool pads ints with NaN,
    MeanVarianceNormalization's body mixes float32 in), it runs the model with the inputs of that
    dtype widened (float32 for floats, float64 for ints) and its outputs are cast back."""
    values = {k: v for k, (v, _) in feeds.items()}
    try:
        outs = ReferenceEvaluator(model).run(None, values)
    except Exception:
        wide = "float64" if dt.startswith(("int", "uint")) else "float32"
        m = onnx.ModelProto()
        m.CopyFrom(model)
        for i in m.graph.input:
            if i.type.tensor_type.elem_type == onnx_type(dt):
                i.type.tensor_type.elem_type = onnx_type(wide)
        widened = {k: (v.astype(wide) if t == dt else v) for k, (v, t) in feeds.items()}
        outs = [np.asarray(o).astype(np_dtype(dt)) if np.asarray(o).dtype == np.dtype(wide) else o
                for o in ReferenceEvaluator(m).run(None, widened)]
        if dt == "float64":
            outs = [Float32Reference(o) for o in outs]
    if node.op_type in SAME_TYPE_OUTPUT and not low_precision(dt):
        outs = [np.asarray(o).astype(np_dtype(dt)) for o in outs]
    return outs


def low_precision(dtype):
    return dtype not in NPY_DTYPES and dtype != "bfloat16"


def check_dtype(kiln, tmp_path, op, opset, make, dt):
    """Runs op in dtype dt through kiln and the reference; returns why it failed, or None.
    float8, float4, int4 and int2 values enter as float32 and leave as float32 through Casts (kiln
    run's files and summaries are float32/bfloat16/.npy types); the op in between runs in dt."""
    rng = np.random.default_rng(0)
    node, feeds = make(dt, rng)
    nodes = [node]
    output_names = list(node.output)
    if low_precision(dt):
        for k, (v, t) in list(feeds.items()):
            if t == dt:
                feeds[k] = (v.astype(np.float32), "float32")
                nodes.insert(0, helper.make_node("Cast", [k], [k + "_lp"], to=onnx_type(dt)))
                node.input[list(node.input).index(k)] = k + "_lp"
        for i, o in enumerate(list(node.output)):
            node.output[i] = o + "_lp"
            nodes.append(helper.make_node("Cast", [o + "_lp"], [o], to=onnx.TensorProto.FLOAT))
        opset = max(opset, 23)
    inputs = [helper.make_tensor_value_info(k, onnx_type(t), list(v.shape)) for k, (v, t) in feeds.items()]
    outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in output_names]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / f"{op}_{dt}.onnx"
    onnx.save(model, path)
    files = {k: write_input(tmp_path / f"{dt}_{k}", k, v, t) for k, (v, t) in feeds.items()}
    try:
        want = reference(model, feeds, dt, [o for o in nodes if o is node][0])
    except Exception as e:  # the reference itself cannot run it: no proof either way
        return f"{dt}: reference failed: {type(e).__name__}: {str(e)[:200]}"
    got, error = run_kiln(kiln, path, files, tmp_path / f"out_{dt}")
    if error:
        return f"{dt}: kiln failed: {error}"
    try:
        compare(got, [w if isinstance(w, Float32Reference) else np.asarray(w) for w in want], dt, op)
    except AssertionError as e:
        return f"{dt}: {(str(e).strip() or 'mismatch').splitlines()[0]}"
    return None


@pytest.mark.parametrize("op", sorted(CASES))
def test_every_claimed_dtype_matches_the_reference(kiln, claims, tmp_path, op):
    if op not in claims:
        pytest.skip(f"kiln does not check {op}'s dtypes")
    opset, make = CASES[op]
    dtypes = claims[op].get("T") or next(iter(claims[op].values()))
    failures = [check_dtype(kiln, tmp_path, op, opset, make, dt) for dt in dtypes]
    failures = [f for f in failures if f]
    assert not failures, f"{op} claims dtypes that do not work:\n" + "\n".join(failures)


def test_a_dtype_the_op_does_not_accept_is_refused_by_name(kiln, tmp_path):
    """Sigmoid of int32 fails at load time, naming the node, input, dtype and accepted dtypes."""
    graph = helper.make_graph([helper.make_node("Sigmoid", ["a"], ["y"], name="sig")], "g",
                              [helper.make_tensor_value_info("a", onnx.TensorProto.INT32, [2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [2])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    np.save(tmp_path / "a.npy", np.array([1, 2], dtype=np.int32))
    r = subprocess.run([str(kiln), "run", str(path), "--input", f"a={tmp_path / 'a.npy'}"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert re.search(r"'sig'.*input 0 'a' is int32; Sigmoid-13 accepts float16, float32, float64, bfloat16 \(T\)",
                     r.stderr), r.stderr
