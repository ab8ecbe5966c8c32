"""Writes the fuzz targets' seed corpus, tests/fuzz/corpus/<corpus>/ (docs/reliability.md, "Fuzzing"),
from the ONNX backend node tests (Debian's libonnx-testdata) and plans built by build/kiln:

  onnx/         small node-test models (onnx_bytes and onnx_structured), and the smallest two
                models of each com.microsoft operator the contrib tests build (their
                contrib_model, with KILN_FUZZ_SEEDS)
  plan/         plans kiln builds from some of them
  npy/          .npy files of every dtype kiln reads, and .npz archives (stored and deflated)
  value_pb/     a kind byte (value_pb_fuzz.cpp) + a test data set's TensorProto, SequenceProto or OptionalProto
  session_run/  a model index + its test data set's inputs, encoded as session_run_fuzz.cpp reads them;
                and one seed per com.microsoft operator of onnx/ (random inputs of its declared shapes)

Run from the repository root with .venv/bin/python after scripts/build; it replaces the folders'
files, except each folder's findings/ (the inputs of earlier findings, kept by hand)."""
import argparse
import io
import os
import pathlib
import shutil
import struct
import subprocess
import tempfile
import zlib

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE_TESTS = pathlib.Path("/usr/share/libonnx-testdata/data/node")
MAX_MODEL_BYTES = 600  # keeps onnx/ small: one- or two-node models
MAX_INPUT_BYTES = 512
MAX_ELEMENTS = 1 << 14  # session_run_fuzz.cpp's limit
PLAN_MODELS = ["test_add", "test_conv_with_strides_padding", "test_gemm_default_matrix_bias", "test_matmul_2d",
               "test_reshape_reordered_all_dims", "test_maxpool_2d_pads", "test_softmax_axis_1", "test_concat_2d_axis_0",
               "test_gather_0", "test_loop11", "test_if", "test_split_equal_parts_1d", "test_batchnorm_example",
               "test_lstm_defaults", "test_resize_upsample_scales_nearest", "test_slice"]
# One of every few node tests goes to onnx/, spread over the alphabet (so over the operators).
ONNX_STRIDE = 3
# One node test in six gets a session_run seed: each new model costs a Session build (about 0.25 s
# under ASan at -O0), and CI's 30 s should not go to the seeds alone.
SESSION_STRIDE = 6


def models():
    return sorted(p for p in NODE_TESTS.iterdir() if (p / "model.onnx").exists())


def write_onnx(out):
    for i, d in enumerate(models()):
        data = (d / "model.onnx").read_bytes()
        if i % ONNX_STRIDE == 0 and len(data) <= MAX_MODEL_BYTES:
            (out / f"{d.name}.onnx").write_bytes(data)
    write_contrib_onnx(out)


CONTRIB_TESTS = ["test_contrib_ops.py", "test_contrib_misc_ops.py", "test_contrib_kv_attention.py",
                 "test_contrib_llm_quant_ops.py", "test_contrib_llm_recent_ops.py", "test_contrib_small_llm_ops.py",
                 "test_contrib_ms_causal_conv.py", "test_contrib_ms_linear_attention.py",
                 "test_contrib_gather_packed.py"]
MAX_CONTRIB_BYTES = 4096
CONTRIB_PER_OP = 2


def write_contrib_onnx(out):
    """Runs the contrib operator tests with KILN_FUZZ_SEEDS and keeps, per operator, its smallest
    models (at most MAX_CONTRIB_BYTES)."""
    with tempfile.TemporaryDirectory() as tmp:
        tests = [str(ROOT / "tests" / "python" / t) for t in CONTRIB_TESTS]
        subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-x", *tests],
                       env={**os.environ, "KILN_FUZZ_SEEDS": tmp}, check=True, capture_output=True)
        by_op = {}
        for path in sorted(pathlib.Path(tmp).iterdir()):
            size = path.stat().st_size
            if size <= MAX_CONTRIB_BYTES:
                by_op.setdefault(path.name.rsplit("_", 1)[0], []).append((size, path))
        for op, models in sorted(by_op.items()):
            for _, path in sorted(models)[:CONTRIB_PER_OP]:
                shutil.copy(path, out / f"contrib_{path.name}")


def write_plans(out, kiln):
    with tempfile.TemporaryDirectory() as tmp:
        for name in PLAN_MODELS:
            plan = pathlib.Path(tmp) / f"{name}.kiln"
            built = subprocess.run([kiln, "build", NODE_TESTS / name / "model.onnx", "-o", plan], capture_output=True)
            if built.returncode == 0:
                shutil.copy(plan, out / plan.name)
            else:
                print(f"plan/: kiln build {name} failed, left out: {built.stderr.decode().strip()}")


def write_npy(out):
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((2, 3)).astype(np.float32), "f16": np.arange(4, dtype=np.float16),
        "f64": np.array([1.5, -2.0]), "i8": np.array([-1, 2], np.int8), "u8": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "i16": np.array([3], np.int16), "u16": np.array([3], np.uint16), "i32": np.array([[7]], np.int32),
        "u32": np.array([1, 2], np.uint32), "i64": np.array([5, -6], np.int64), "u64": np.array([9], np.uint64),
        "bool": np.array([True, False]), "scalar": np.float32(2.5), "empty": np.zeros((0, 3), np.float32),
        "unicode": np.array(["ab", "c"]), "big_endian": np.array([1, 2], ">i4"),
    }
    for name, a in arrays.items():
        np.save(out / f"{name}.npy", a)
    buf = io.BytesIO()
    np.save(buf, arrays["f32"])
    v2 = buf.getvalue()
    # Format version 2.0: a 4-byte header length.
    header_len = struct.unpack("<H", v2[8:10])[0]
    (out / "version2.npy").write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", header_len) + v2[10:])
    np.savez(out / "stored.npz", a=arrays["f32"], b=arrays["i64"])
    np.savez_compressed(out / "deflated.npz", a=arrays["u8"], b=arrays["bool"])


def write_value_pb(out):
    kinds = {"tensor": 0, "sequence": 0x20, "optional": 0x40}
    for d in models():
        for pb in sorted((d / "test_data_set_0").glob("input_*.pb"))[:1]:
            data = pb.read_bytes()
            if len(data) > MAX_INPUT_BYTES:
                continue
            kind = "optional" if "optional" in d.name else "sequence" if "sequence" in d.name else "tensor"
            if kind == "tensor" and zlib.crc32(d.name.encode()) % 4:
                continue  # one tensor in four: they are alike
            (out / f"{d.name}.bin").write_bytes(bytes([kinds[kind]]) + data)


def graph_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def session_seed(index, d):
    """[u16 index] then per input [mode 0][a byte per dynamic dim][the values], or None if unusable."""
    model = onnx.load(d / "model.onnx")
    seed = bytearray(struct.pack("<H", index))
    inputs = graph_inputs(model)
    files = sorted((d / "test_data_set_0").glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    if len(files) != len(inputs):
        return None
    for info, pb in zip(inputs, files):
        if not info.type.HasField("tensor_type"):
            return None
        tensor = onnx.TensorProto()
        tensor.ParseFromString(pb.read_bytes())
        if tensor.data_type in (onnx.TensorProto.STRING,) or tensor.data_type > 16:
            return None
        array = numpy_helper.to_array(tensor)
        if array.size > MAX_ELEMENTS or array.nbytes > MAX_INPUT_BYTES:
            return None
        seed.append(0)
        for dim, size in zip(info.type.tensor_type.shape.dim, array.shape):
            if not dim.HasField("dim_value"):
                seed.append(size % 6)
        seed += np.ascontiguousarray(array).tobytes()
    return bytes(seed)


def contrib_session_seed(index, path):
    """A contrib model's seed: [u16 index] then per input [mode 0][2 per dynamic dim][random values
    of that shape, small for integers (indices, lengths)], or None if an input is not a plain tensor
    or too large."""
    model = onnx.load(path)
    rng = np.random.default_rng(zlib.crc32(path.name.encode()))
    seed = bytearray(struct.pack("<H", index))
    for info in graph_inputs(model):
        if not info.type.HasField("tensor_type"):
            return None
        elem = info.type.tensor_type.elem_type
        if elem == onnx.TensorProto.STRING or elem > 16:
            return None
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in info.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        array = rng.standard_normal(dims) if np.issubdtype(dtype, np.floating) else rng.integers(0, 3, dims)
        array = np.asarray(array).astype(dtype)
        if array.size > MAX_ELEMENTS or array.nbytes > MAX_INPUT_BYTES:
            return None
        seed.append(0)
        seed += bytes(2 for d in info.type.tensor_type.shape.dim if not d.HasField("dim_value"))
        seed += np.ascontiguousarray(array).tobytes()
    return bytes(seed)


def write_session_run(out):
    node_models = models()
    for index, d in enumerate(node_models):
        if index % SESSION_STRIDE:
            continue  # the fuzzer reaches the others by the index
        seed = session_seed(index, d)
        if seed is not None:
            (out / f"{d.name}.bin").write_bytes(seed)
    # session_run_fuzz.cpp lists the onnx corpus's contrib models after the node tests; one seed
    # per operator (its first model).
    contrib = sorted((out.parent / "onnx").glob("contrib_*.onnx"))
    seen = set()
    for index, path in enumerate(contrib, start=len(node_models)):
        op = path.stem.rsplit("_", 1)[0]
        if op in seen:
            continue
        seed = contrib_session_seed(index, path)
        if seed is not None:
            seen.add(op)
            (out / f"{path.stem}.bin").write_bytes(seed)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln", default=ROOT / "build" / "kiln", help="the kiln CLI that builds the plans")
    parser.add_argument("--out", default=ROOT / "tests" / "fuzz" / "corpus", type=pathlib.Path)
    args = parser.parse_args()
    for name, write in [("onnx", write_onnx), ("plan", lambda o: write_plans(o, args.kiln)), ("npy", write_npy),
                        ("value_pb", write_value_pb), ("session_run", write_session_run)]:
        folder = args.out / name
        # findings/ holds the inputs of earlier findings (docs/reliability.md), added by hand: kept.
        for path in folder.glob("*"):
            if path.name != "findings":
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        write(folder)
        files = [f for f in folder.iterdir() if f.is_file()]
        print(f"{name}: {len(files)} files, {sum(f.stat().st_size for f in files) // 1024} KiB")


if __name__ == "__main__":
    main()
