#!/usr/bin/env python3
"""Runs ONNX's backend test folders through kiln and onnxruntime and reports conformance.

See tests/conformance/README.md for usage.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

import numpy as np
import numpy.testing  # lazily imported by numpy; import it once here, not in every test process
import ml_dtypes
import onnx
import onnxruntime
from google.protobuf.message import DecodeError
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_DATA = Path("/usr/share/libonnx-testdata/data")
WHEEL_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
# The generated expected values depend on ml_dtypes too (0.7 casts out-of-range floats to int4 differently).
GENERATED_DATA = ROOT / "build" / "onnx-tests" / f"onnx{onnx.__version__}-ml_dtypes{ml_dtypes.__version__}"
CATEGORIES = ("node", "pytorch-converted", "pytorch-operator", "simple")
STATUSES = ("passed", "fail", "unsupported", "skipped", "crash", "timeout")
FAILED = ("fail", "crash", "timeout")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7
UNSUPPORTED_EXIT_CODE = 3
REASON_LENGTH = 120


class Outcome(Exception):
    """Ends a test early with a status other than passed."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Test:
    suite: str
    category: str
    path: Path
    rtol: float
    atol: float

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.category}/{self.name}"

    @property
    def model(self) -> Path:
        return self.path / "model.onnx"

    @property
    def data_sets(self) -> list[Path]:
        return sorted(self.path.glob("test_data_set_*"))


# ---------------------------------------------------------------- test discovery


def suite_folders(suite: str) -> dict[str, Path]:
    if suite == "debian":
        return {category: DEBIAN_DATA / category for category in CATEGORIES}
    generated = generated_data()
    return {
        "node": generated / "node",
        "pytorch-converted": WHEEL_DATA / "pytorch-converted",
        "pytorch-operator": WHEEL_DATA / "pytorch-operator",
        "simple": generated / "simple",
    }


def discover(suites: list[str], pattern: str) -> list[Test]:
    tests = []
    for suite in suites:
        for category, folder in suite_folders(suite).items():
            for path in sorted(folder.iterdir()):
                key = f"{suite}/{category}/{path.name}"
                if (path / "model.onnx").is_file() and re.search(pattern, key):
                    tests.append(Test(suite, category, path, *tolerances(path)))
    return tests


def tolerances(path: Path) -> tuple[float, float]:
    """Reads rtol/atol from the folder's data.json, as ONNX's test loader does."""
    data = path / "data.json"
    settings = json.loads(data.read_text()) if data.is_file() else {}
    return settings.get("rtol", DEFAULT_RTOL), settings.get("atol", DEFAULT_ATOL)


# ------------------------------------------- writing the wheel's generated tests


def generated_data() -> Path:
    """Writes the onnx wheel's node and simple test cases to folders, once per onnx version."""
    done = GENERATED_DATA / ".complete"
    if not done.exists():
        print(f"writing onnx {onnx.__version__} test cases to {GENERATED_DATA}", file=sys.stderr)
        shutil.rmtree(GENERATED_DATA, ignore_errors=True)
        for case in generated_cases():
            write_case(case, GENERATED_DATA / case.kind / case.name)
        done.touch()
    return GENERATED_DATA


def generated_cases() -> list:
    from onnx.backend.test.case import model, node  # slow; only needed when writing the cache

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases() + model.collect_testcases()
    return [case for case in cases if case.kind in ("node", "simple")]


def write_case(case, folder: Path) -> None:
    for index, (inputs, outputs) in enumerate(case.data_sets):
        data_set = folder / f"test_data_set_{index}"
        data_set.mkdir(parents=True)
        write_values(data_set, "input", inputs, case.model.graph.input)
        write_values(data_set, "output", outputs, case.model.graph.output)
    (folder / "model.onnx").write_bytes(case.model.SerializeToString())
    (folder / "data.json").write_text(json.dumps({"rtol": case.rtol, "atol": case.atol}))


def write_values(folder: Path, prefix: str, values, infos) -> None:
    for index, (value, info) in enumerate(zip(values, infos)):
        (folder / f"{prefix}_{index}.pb").write_bytes(to_proto(value, info).SerializeToString())


def to_proto(value, info: onnx.ValueInfoProto):
    if isinstance(value, onnx.TensorProto):
        return value
    writers = {
        "map_type": numpy_helper.from_dict,
        "sequence_type": numpy_helper.from_list,
        "optional_type": numpy_helper.from_optional,
    }
    return writers.get(info.type.WhichOneof("value"), numpy_helper.from_array)(value, info.name)


# ------------------------------------------------------------------ one test


@dataclass(frozen=True)
class Value:
    """One input or output of a data set: its .pb file, its ONNX kind and the value decoded from it
    (an array; a list of arrays for a sequence; None or the element for an optional)."""

    name: str
    file: Path
    kind: str  # "tensor", "sequence" or "optional"
    value: object

    @property
    def needs_proto(self) -> bool:
        """Whether kiln must get it as the .pb file: sequences, optionals, and dtypes .npy lacks."""
        return self.kind != "tensor" or is_ml_dtype(self.value)


def run_test(test: Test, engine) -> None:
    """Runs every data set of a test through engine; raises Outcome unless all pass."""
    model = onnx.load(test.model, load_external_data=False)
    check_value_types(model)
    inputs_info = graph_inputs(model)
    if not test.data_sets:
        raise Outcome("skipped", "no test data")
    for data_set in test.data_sets:
        inputs = load_values(data_set, "input", inputs_info)
        expected = load_values(data_set, "output", list(model.graph.output))
        check_data_types([*inputs, *expected], [*inputs_info, *model.graph.output])
        compare(engine(test.model, inputs), expected, test.rtol, test.atol)


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs test data feeds: those not backed by an initializer."""
    initializers = {tensor.name for tensor in model.graph.initializer}
    return [info for info in model.graph.input if info.name not in initializers]


def value_kind(type_proto: onnx.TypeProto) -> str | None:
    """"tensor", "sequence" or "optional" for the values kiln can hold (tensors, sequences of
    tensors, optionals of either); None for maps, sparse tensors and nestings kiln has no value for."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return "tensor"
    if kind == "sequence_type":
        return "sequence" if value_kind(type_proto.sequence_type.elem_type) == "tensor" else None
    if kind == "optional_type":
        return "optional" if value_kind(type_proto.optional_type.elem_type) in ("tensor", "sequence") else None
    return None


def check_value_types(model: onnx.ModelProto) -> None:
    for info in [*graph_inputs(model), *model.graph.output]:
        if value_kind(info.type) is None:
            kind = (info.type.WhichOneof("value") or "untyped_type").removesuffix("_type")
            raise Outcome("skipped", f"{kind} input or output '{info.name}' holds values kiln has no type for")


def check_data_types(values: list[Value], infos: list[onnx.ValueInfoProto]) -> None:
    """Skips data sets whose tensors contradict the model: ONNX 1.12's bfloat16 cases store their
    data as uint16 while the model says bfloat16, which every runtime rightly refuses."""
    for value, info in zip(values, infos):
        element = info.type.tensor_type.elem_type if value.kind == "tensor" else 0
        if element and isinstance(value.value, np.ndarray):
            declared = onnx.helper.tensor_dtype_to_np_dtype(element)
            if value.value.dtype != declared and not (is_string(value.value) and declared.kind in "OUS"):
                raise Outcome("skipped", f"test data {value.file.name} holds {value.value.dtype}, the model declares "
                              f"'{info.name}' as {declared.name}")


def load_values(data_set: Path, prefix: str, infos: list[onnx.ValueInfoProto]) -> list[Value]:
    files = sorted(data_set.glob(f"{prefix}_*.pb"), key=lambda file: int(file.stem.split("_")[-1]))
    values = []
    for index, file in enumerate(files):
        info = infos[index] if index < len(infos) else None
        kind = value_kind(info.type) if info is not None else "tensor"
        values.append(Value(info.name if info is not None else "", file, kind, load_value(file.read_bytes(), kind)))
    return values


def load_value(data: bytes, kind: str):
    """Decodes a TensorProto, SequenceProto or OptionalProto as numpy_helper does."""
    message = {"tensor": onnx.TensorProto, "sequence": onnx.SequenceProto, "optional": onnx.OptionalProto}[kind]()
    message.ParseFromString(data)
    decode = {"tensor": numpy_helper.to_array, "sequence": numpy_helper.to_list, "optional": numpy_helper.to_optional}
    return decode[kind](message)


def is_ml_dtype(value) -> bool:
    """bfloat16, float8*, int4, ... arrays (ml_dtypes types, which .npy cannot hold)."""
    return isinstance(value, np.ndarray) and value.dtype.isbuiltin == 2


def is_string(array: np.ndarray) -> bool:
    return array.dtype.kind in "OUS"


def as_strings(array: np.ndarray) -> np.ndarray:
    decode = np.vectorize(lambda value: value.decode() if isinstance(value, bytes) else str(value), otypes=[str])
    return decode(array) if array.size else array.astype(str)


def compare(got: list, expected: list[Value], rtol: float, atol: float) -> None:
    """Compares outputs positionally, as ONNX's backend test runner does."""
    if len(got) != len(expected):
        raise Outcome("fail", f"{len(got)} outputs, expected {len(expected)}")
    for index, (actual, wanted) in enumerate(zip(got, expected)):
        problem = value_difference(actual, wanted.value, wanted.kind, rtol, atol)
        if problem:
            raise Outcome("fail", f"output {index}: {problem}")


def value_difference(actual, wanted, kind: str, rtol: float, atol: float) -> str:
    """Sequences element by element; optionals both empty, or their elements compared."""
    if kind == "optional":
        if actual is None or wanted is None:
            return "" if actual is None and wanted is None else f"{'empty' if actual is None else 'a value'}, expected " + (
                "an empty optional" if wanted is None else "a value")
        kind = "sequence" if isinstance(wanted, list) else "tensor"
    if kind == "sequence":
        if not isinstance(actual, list):
            return f"a {type(actual).__name__}, expected a sequence"
        if len(actual) != len(wanted):
            return f"a sequence of {len(actual)} tensors, expected {len(wanted)}"
        for index, (item, wanted_item) in enumerate(zip(actual, wanted)):
            problem = difference(np.asarray(item), wanted_item, rtol, atol)
            if problem:
                return f"item {index}: {problem}"
        return ""
    return difference(np.asarray(actual), wanted, rtol, atol)


def difference(actual: np.ndarray, wanted: np.ndarray, rtol: float, atol: float) -> str:
    if actual.shape != wanted.shape:
        return f"shape {list(actual.shape)}, expected {list(wanted.shape)}"
    if is_string(wanted) or is_string(actual):
        if not (is_string(wanted) and is_string(actual)):
            return f"dtype {actual.dtype}, expected {wanted.dtype}"
        return "" if np.array_equal(as_strings(actual), as_strings(wanted)) else "strings differ"
    if actual.dtype != wanted.dtype:
        return f"dtype {actual.dtype}, expected {wanted.dtype}"
    if is_ml_dtype(wanted):  # numpy compares bfloat16, float8, int4, ... through float32
        actual, wanted = actual.astype(np.float32), wanted.astype(np.float32)
    try:
        np.testing.assert_allclose(actual, wanted, rtol=rtol, atol=atol)
    except AssertionError as error:
        return mismatch_summary(str(error))
    return ""


def mismatch_summary(message: str) -> str:
    count = re.search(r"Mismatched elements: (\S+ / \S+)", message)
    worst = re.search(r"Max absolute difference[^:]*: (\S+)", message)
    if count:
        return f"{count[1]} elements differ" + (f", max abs diff {worst[1]}" if worst else "")
    detail = text_lines(message)[1:2]  # the line after "Not equal to tolerance", e.g. "inf location mismatch:"
    return detail[0] if detail else first_line(message)


def first_line(text: str) -> str:
    return next(iter(text_lines(text)), "")


def last_line(text: str) -> str:
    return next(reversed(text_lines(text)), "")


def text_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------ engines


def run_kiln(kiln: str, timeout: float, model: Path, feeds: list[Value]) -> list:
    with tempfile.TemporaryDirectory(prefix="kiln-conformance-") as tmp:
        command = [kiln, "run", str(model)]
        for index, feed in enumerate(feeds):
            if feed.needs_proto:  # sequences, optionals, bfloat16, ...: the data set's own .pb file
                file = feed.file
            else:
                file = Path(tmp) / f"input_{index}.npy"
                np.save(file, as_strings(feed.value) if is_string(feed.value) else feed.value)
            command += ["--input", f"{feed.name}={file}"]
        output_dir = Path(tmp) / "outputs"
        output_dir.mkdir()
        check_exit(run_process(command + ["--output-dir", str(output_dir)], timeout), model)
        return read_outputs(output_dir)


def run_process(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Outcome("timeout", f"exceeded {timeout:g} s") from None


def check_exit(process: subprocess.CompletedProcess, model: Path) -> None:
    code = process.returncode
    if code < 0:
        raise Outcome("crash", signal_name(-code))
    if code:
        status = "unsupported" if code == UNSUPPORTED_EXIT_CODE else "fail"
        reason = last_line(process.stderr).replace(f"{model}: ", "")  # the path would fill the report's column
        raise Outcome(status, reason or f"exit code {code}")


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def read_outputs(folder: Path) -> list[np.ndarray]:
    try:
        listing = json.loads((folder / "outputs.json").read_text())["outputs"]
        return [read_output(folder, entry) for entry in listing]
    except (OSError, ValueError, KeyError, TypeError, DecodeError) as error:
        raise Outcome("fail", f"unreadable outputs: {error}") from None


def read_output(folder: Path, entry: dict):
    """An output kiln wrote: .npy, or .pb (a TensorProto, SequenceProto or OptionalProto by its kind)."""
    if entry.get("format", "npy") == "npy":
        return np.load(folder / entry["file"])
    return load_value((folder / entry["file"]).read_bytes(), entry["kind"])


def run_ort(model: Path, feeds: list[Value]) -> list:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    onnxruntime.set_default_logger_severity(4)  # errors are reported as test results, not logged
    try:
        session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        return session.run(None, {feed.name: feed.value for feed in feeds})
    except Exception as error:  # onnxruntime raises assorted exception types
        raise Outcome("fail", ort_reason(str(error))) from None


def ort_reason(message: str) -> str:
    """Strips onnxruntime's error code, model path and C++ source location from an error message."""
    for noise in (
        r"\[ONNXRuntimeError\] : \d+ : ",
        r"Load model from \S+ failed:",
        r"/onnxruntime_src/\S+ ",
        r"onnxruntime::[\w:~<>]+\([^)]*\)( \[with [^]]*\])?(::<lambda\(\)>)? ",
    ):
        message = re.sub(noise, "", message)
    return first_line(message)


# ------------------------------------------------------- running tests in parallel


def execute(test: Test, engine) -> tuple[str, str]:
    try:
        run_test(test, engine)
        return "passed", ""
    except Outcome as outcome:
        return outcome.status, outcome.reason
    except Exception as error:  # a broken test folder must not stop the run
        return "fail", f"runner error: {type(error).__name__}: {first_line(str(error))}"


def child(connection: Connection, test: Test, engine) -> None:
    status, reason = execute(test, engine)
    connection.send((status, short(reason)))


@dataclass
class Job:
    """A test running in its own forked process, so that a crash or hang only costs that test."""

    test: Test
    process: multiprocessing.Process
    receiver: Connection
    limit: float
    deadline: float


def start_job(test: Test, engine, timeout: float) -> Job:
    # fork: a test process inherits the loaded modules, so it starts in milliseconds (one stuck on a
    # lock that a library thread held at fork time would end as a timeout).
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=child, args=(sender, test, engine))
    process.start()
    sender.close()
    limit = timeout * max(1, len(test.data_sets)) + 10
    return Job(test, process, receiver, limit, time.monotonic() + limit)


def finish_job(job: Job, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        job.process.kill()
    job.process.join()
    with job.receiver:
        if timed_out:
            return "timeout", f"exceeded {job.limit:g} s"
        if job.process.exitcode < 0:
            return "crash", signal_name(-job.process.exitcode)
        try:
            return job.receiver.recv()
        except EOFError:
            return "crash", f"exit code {job.process.exitcode} without a result"


def run_phase(label: str, tests: list[Test], engine, jobs: int, timeout: float) -> dict[str, tuple[str, str]]:
    start = time.monotonic()
    waiting, running, outcomes = list(reversed(tests)), {}, {}
    while waiting or running:
        while waiting and len(running) < jobs:
            job = start_job(waiting.pop(), engine, timeout)
            running[job.process.sentinel] = job
        next_deadline = min(job.deadline for job in running.values())
        ready = set(wait(list(running), timeout=max(0.0, next_deadline - time.monotonic())))
        now = time.monotonic()
        for sentinel, job in list(running.items()):
            if sentinel in ready or job.deadline <= now:
                del running[sentinel]
                outcomes[job.test.key] = finish_job(job, timed_out=sentinel not in ready)
    print(f"{label}: ran {len(tests)} tests in {time.monotonic() - start:.0f} s", flush=True)
    return outcomes


def short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_LENGTH else text[: REASON_LENGTH - 3] + "..."


# ---------------------------------------------------------------- ORT cache


def ort_versions() -> dict[str, str]:
    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def load_ort_cache(path: Path) -> dict[str, dict[str, str]]:
    cache = read_json(path)
    if {key: cache.get(key) for key in ort_versions()} != ort_versions():
        return {}
    return cache.get("results", {})


def save_ort_cache(path: Path, results: dict[str, dict[str, str]]) -> None:
    write_json(path, {**ort_versions(), "results": dict(sorted(results.items()))}, leaf_depth=2)


# ------------------------------------------------------------------ results


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def write_json(path: Path, value, leaf_depth: int) -> None:
    """Writes JSON with objects below leaf_depth on one line each, for readable diffs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(value, leaf_depth) + "\n")


def json_text(value, leaf_depth: int, indent: str = "") -> str:
    if leaf_depth == 0 or not isinstance(value, dict) or not value:
        return json.dumps(value)
    inner = indent + "  "
    items = [f"{inner}{json.dumps(key)}: {json_text(item, leaf_depth - 1, inner)}" for key, item in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def flatten(results: dict) -> dict[str, dict[str, str]]:
    return {
        f"{suite}/{category}/{test}": entry
        for suite, categories in results.items()
        for category, tests in categories.items()
        for test, entry in tests.items()
    }


def nest(entries: dict[str, dict[str, str]]) -> dict:
    results: dict = {}
    for key in sorted(entries):
        suite, category, test = key.split("/")
        results.setdefault(suite, {}).setdefault(category, {})[test] = entries[key]
    return results


def regressions(baseline: dict, fresh: dict) -> tuple[list[str], list[str]]:
    """Tests that passed in the baseline and no longer do, and tests that newly pass."""
    before = {key: entry["kiln"] for key, entry in flatten(baseline).items()}
    lost = [key for key, entry in fresh.items() if before.get(key) == "passed" and entry["kiln"] != "passed"]
    gained = [key for key, entry in fresh.items() if before.get(key) != "passed" and entry["kiln"] == "passed"]
    return lost, gained


# ------------------------------------------------------------------ report


def render_report(results: dict, command: str) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# kiln ONNX conformance",
        "",
        f"Generated {now} with onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__} "
        f"(Debian test data {debian_data_version()}) by:",
        "",
        f"    {command}",
        "",
        *summary_table(results),
        "",
    ]
    for suite, categories in results.items():
        for category, tests in categories.items():
            lines += ["", f"## {suite} / {category}", "", *test_table(tests)]
    return "\n".join(lines) + "\n"


def debian_data_version() -> str:
    query = ["dpkg-query", "-W", "-f=${Version}", "libonnx-testdata"]
    found = subprocess.run(query, capture_output=True, text=True, check=False)
    return found.stdout.strip() or "unknown"


def summary_table(results: dict) -> list[str]:
    header = ["Suite", "Category", "Tests", *STATUSES, "ORT passed", "ORT-only passes"]
    lines = [row(header), row(["---"] * len(header))]
    ort_only = 0
    for suite, categories in results.items():
        for category, tests in categories.items():
            counts = Counter(entry["kiln"] for entry in tests.values())
            ort = sum(entry["ort"] == "passed" for entry in tests.values())
            missing = sum(entry["ort"] == "passed" and entry["kiln"] != "passed" for entry in tests.values())
            ort_only += missing
            lines.append(row([suite, category, len(tests), *(counts[s] for s in STATUSES), ort, missing]))
    return [*lines, "", f"onnxruntime passes {ort_only} tests that kiln does not."]


def test_table(tests: dict) -> list[str]:
    lines = [row(["Test", "kiln", "ORT", "Reason"]), row(["---"] * 4)]
    lines += [row([name, entry["kiln"], entry["ort"], entry["reason"]]) for name, entry in tests.items()]
    return lines


def row(cells: list) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


# ------------------------------------------------------------------ driver


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("debian", "pypi", "all"), default="all")
    parser.add_argument("--filter", default="", metavar="REGEX", help="run tests whose suite/category/name matches")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), metavar="N")
    parser.add_argument("--timeout", type=float, default=60, metavar="SEC", help="per model run")
    parser.add_argument("--kiln", type=Path, default=ROOT / "build" / "kiln", metavar="PATH")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "conformance.md")
    parser.add_argument("--results", type=Path, default=ROOT / "tests" / "conformance" / "results.json")
    parser.add_argument("--check", action="store_true", help="fail on tests that passed in the --results baseline")
    parser.add_argument("--ort-cache", type=Path, default=ROOT / "tests" / "conformance" / "ort_results.json")
    parser.add_argument("--refresh-ort", action="store_true", help="rerun onnxruntime for every selected test")
    return parser.parse_args()


def ort_results(args: argparse.Namespace, tests: list[Test]) -> dict[str, dict[str, str]]:
    cache = {} if args.refresh_ort else load_ort_cache(args.ort_cache)
    missing = [test for test in tests if test.key not in cache]
    if missing:
        fresh = run_phase("onnxruntime", missing, run_ort, args.jobs, args.timeout)
        cache.update({key: {"status": status, "reason": reason} for key, (status, reason) in fresh.items()})
        save_ort_cache(args.ort_cache, cache)
    return cache


def main() -> int:
    args = parse_args()
    kiln = shutil.which(str(args.kiln))
    if kiln is None:
        sys.exit(f"kiln binary not found or not executable: {args.kiln} (build it or pass --kiln)")
    tests = discover(["debian", "pypi"] if args.suite == "all" else [args.suite], args.filter)
    baseline = read_json(args.results)
    ort = ort_results(args, tests)
    outcomes = run_phase("kiln", tests, functools.partial(run_kiln, kiln, args.timeout), args.jobs, args.timeout)
    fresh = {
        key: {"kiln": status, "reason": reason, "ort": ort[key]["status"]} for key, (status, reason) in outcomes.items()
    }
    partial = bool(args.filter) or args.suite != "all"
    write_json(args.results, nest({**(flatten(baseline) if partial else {}), **fresh}), leaf_depth=3)
    command = shlex.join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(render_report(read_json(args.results), command))
    print(f"wrote {args.results} and {args.report}")
    return finish(args.check, baseline, fresh)


def finish(check: bool, baseline: dict, fresh: dict) -> int:
    counts = Counter(entry["kiln"] for entry in fresh.values())
    failed = sum(counts[status] for status in FAILED)
    if check:
        lost, gained = regressions(baseline, fresh)
        for key in gained:
            print(f"newly passing: {key}")
        for key in lost:
            print(f"REGRESSION: {key}: {fresh[key]['kiln']}: {fresh[key]['reason']}")
        failed = len(lost)
    print(f"{counts['passed']} passed, {failed} failed, {len(fresh) - counts['passed'] - failed} skipped")
    return 1 if check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
