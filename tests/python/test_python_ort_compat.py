"""kiln as a drop-in for onnxruntime: the same scripts run against both modules, on the same
models, and must see the same inputs/outputs, metadata, providers, results and errors."""
import importlib
import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest

import kiln
import python_api_models as models

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("compat_models")
    return {
        "srcnn": str(REPO_ROOT / "models" / "srcnn.onnx"),
        "symbolic": models.symbolic_model(d / "symbolic.onnx"),
        "fixed": models.fixed_model(d / "fixed.onnx"),
        "sequence_optional": models.sequence_optional_model(d / "seq.onnx"),
        "sequence_input": models.sequence_input_model(d / "seq_input.onnx"),
        "strings": models.string_model(d / "strings.onnx"),
        "unsupported": models.unsupported_model(d / "unsupported.onnx"),
    }


RNG = np.random.default_rng(0)
FEEDS = {
    "srcnn": {"input": RNG.random((1, 3, 256, 256), dtype=np.float32)},
    "symbolic": {"x": RNG.standard_normal((5, 4)).astype(np.float32)},
    "symbolic_overridden": {"x": RNG.standard_normal((2, 4)).astype(np.float32), "b": np.array([1, 2, 3], np.float32)},
    "fixed": {"x": RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)},
    "sequence_optional": {"a": np.array([3, -1, 7], np.int64)},
    "sequence_input": {"items": [np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32).reshape(1, 3)]},
    "strings": {"words": np.array(["cat", "dog", "cat", "ému"], dtype=object)},
}
CASES = [  # (model, feed, load from bytes)
    ("srcnn", "srcnn", False), ("symbolic", "symbolic", False), ("symbolic", "symbolic", True),
    ("symbolic", "symbolic_overridden", False), ("fixed", "fixed", False),
    ("sequence_optional", "sequence_optional", False), ("sequence_input", "sequence_input", False),
    ("strings", "strings", False),
]


def typical_program(rt, model, feeds):
    """What an onnxruntime user writes: options, a session, its description, metadata, a run."""
    options = rt.SessionOptions()
    options.intra_op_num_threads = 2
    options.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = rt.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta()
    return {
        "inputs": [(a.name, a.shape, a.type) for a in session.get_inputs()],
        "outputs": [(a.name, a.shape, a.type) for a in session.get_outputs()],
        "overridable": [(a.name, a.shape, a.type) for a in session.get_overridable_initializers()],
        "meta": (meta.producer_name, meta.graph_name, meta.graph_description, meta.domain, meta.description,
                 meta.version, meta.custom_metadata_map),
        "providers": session.get_providers(),
        "provider_options": session.get_provider_options(),
        "first_output": session.run([session.get_outputs()[0].name], feeds),
        "results": session.run(None, feeds),
    }


def assert_same_value(kiln_value, ort_value, where):
    if ort_value is None:
        assert kiln_value is None, where
        return
    if isinstance(ort_value, list):
        assert isinstance(kiln_value, list) and len(kiln_value) == len(ort_value), where
        for i, (k, o) in enumerate(zip(kiln_value, ort_value)):
            assert_same_value(k, o, f"{where}[{i}]")
        return
    assert isinstance(kiln_value, np.ndarray), where
    assert kiln_value.dtype == ort_value.dtype and kiln_value.shape == ort_value.shape, where
    if ort_value.dtype == object:
        assert kiln_value.tolist() == ort_value.tolist(), where
    else:
        np.testing.assert_allclose(kiln_value, ort_value, rtol=2e-5, atol=2e-5, err_msg=where)


@pytest.mark.parametrize("model,feed,from_bytes", CASES)
def test_same_program_same_answers(paths, model, feed, from_bytes):
    source = pathlib.Path(paths[model]).read_bytes() if from_bytes else paths[model]
    ort = typical_program(onnxruntime, source, FEEDS[feed])
    ours = typical_program(kiln, source, FEEDS[feed])
    for key in ("inputs", "outputs", "overridable", "meta", "providers", "provider_options"):
        assert ours[key] == ort[key], key
    for key in ("first_output", "results"):
        assert len(ours[key]) == len(ort[key])
        for i, (k, o) in enumerate(zip(ours[key], ort[key])):
            assert_same_value(k, o, f"{key}[{i}]")


def test_metadata_is_what_the_model_says(paths):
    meta = kiln.InferenceSession(paths["symbolic"]).get_modelmeta()
    assert (meta.producer_name, meta.graph_name, meta.graph_description, meta.domain, meta.description, meta.version) == (
        "kiln-tests", "symbolic_graph", "a linear layer and a relu", "org.kiln.tests", "symbolic batch model", 3)
    assert meta.custom_metadata_map == {"labels": "cat,dog,bird", "author": "kiln"}


# ---- errors: same class; the same message where onnxruntime raises from Python, else
# onnxruntime's "[ONNXRuntimeError] : code : NAME :" prefix and a message naming what is wrong.

def _raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


def _feed(**changes):
    return {**FEEDS["symbolic"], **changes}


ERROR_CASES = {
    # name: (what to do with (module, paths), fragments kiln's message must contain)
    "wrong input name": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, _feed(z=FEEDS["symbolic"]["x"])),
                         ["'z'", "x"]),
    "wrong input name with a list": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, _feed(z=[1.0])), None),
    "wrong dtype": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, _feed(x=FEEDS["symbolic"]["x"].astype(np.float64))),
                    ["'x'", "float64", "float32"]),
    "object array for a float input": (
        lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, _feed(x=FEEDS["symbolic"]["x"].astype(object))),
        ["'x'", "string", "float32"]),
    "wrong rank": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, _feed(x=np.zeros((2, 4, 1), np.float32))),
                   ["'x'", "rank 3", "rank 2"]),
    "wrong dimension": (lambda rt, p: rt.InferenceSession(p["fixed"]).run(None, {"x": np.zeros((2, 3, 4, 5), np.float32)}),
                        ["'x'", "index 0: got 2, expected 1", "index 3: got 5, expected 4"]),
    "missing input": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, {}), None),
    "list of strings for a float input": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, {"x": "abc"}), None),
    "python float feed": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, {"x": 1.5}), None),
    "numpy scalar feed": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, {"x": np.float32(1.5)}), None),
    "tuple feed": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(None, {"x": (1.0, 2.0)}), None),
    "invalid output name": (lambda rt, p: rt.InferenceSession(p["symbolic"]).run(["nope"], FEEDS["symbolic"]), ["nope"]),
    "missing model file": (lambda rt, p: rt.InferenceSession(str(pathlib.Path(p["symbolic"]).parent / "absent.onnx")),
                           ["absent.onnx"]),
    "garbage model file": (lambda rt, p: rt.InferenceSession(_garbage_file(p)), ["garbage.onnx", "not a valid ONNX model"]),
    "garbage bytes": (lambda rt, p: rt.InferenceSession(b"\x08\x01\x12garbage"), ["not a valid ONNX model"]),
    "not a path or bytes": (lambda rt, p: rt.InferenceSession(42), None),
}


def test_output_names_must_be_strings(paths):
    for rt in (onnxruntime, kiln):
        with pytest.raises(TypeError):
            rt.InferenceSession(paths["symbolic"]).run([1], FEEDS["symbolic"])


def _garbage_file(p):
    path = pathlib.Path(p["symbolic"]).parent / "garbage.onnx"
    path.write_bytes(b"\x01\x02 this is not an onnx model")
    return str(path)


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_match_onnxruntime(paths, case):
    action, fragments = ERROR_CASES[case]
    ort_error = _raised(lambda: action(onnxruntime, paths))
    kiln_error = _raised(lambda: action(kiln, paths))
    assert type(kiln_error).__name__ == type(ort_error).__name__, (kiln_error, ort_error)
    if fragments is None:  # raised by onnxruntime's Python code: the very same message
        assert str(kiln_error) == str(ort_error)
        return
    prefix = str(ort_error).split(" : ")[:3]
    assert str(kiln_error).split(" : ")[:3] == prefix, (kiln_error, ort_error)
    for fragment in fragments:
        assert fragment in str(kiln_error), (fragment, kiln_error)


def test_capi_is_loaded_with_the_package():
    assert kiln.capi._pybind_state.get_available_providers() == ["CPUExecutionProvider"]
    assert kiln.capi.onnxruntime_pybind11_state.InvalidArgument is kiln.InvalidArgument


def test_error_classes_live_where_onnxruntime_puts_them():
    from kiln.capi import _pybind_state
    from kiln.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidGraph, NoSuchFile, NotImplemented

    for cls in (Fail, InvalidArgument, InvalidGraph, NoSuchFile, NotImplemented):
        assert issubclass(cls, Exception) and not issubclass(cls, RuntimeError)
        assert getattr(_pybind_state, cls.__name__) is cls is getattr(kiln, cls.__name__)
        assert cls.__module__ == "kiln.capi.onnxruntime_pybind11_state"
        assert cls.__name__ in dir(onnxruntime.capi.onnxruntime_pybind11_state)


def test_unsupported_ops_are_listed_together(paths):
    with pytest.raises(kiln.NotImplemented) as info:
        kiln.InferenceSession(paths["unsupported"])
    message = str(info.value)
    assert message.startswith("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : ")
    for node in ("first_bad", "FrobnicateA", "second_bad", "FrobnicateB"):
        assert node in message
    with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidGraph):
        onnxruntime.InferenceSession(paths["unsupported"])  # onnxruntime stops at the first


# ---- providers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rt", [onnxruntime, kiln], ids=["onnxruntime", "kiln"])
def test_unavailable_providers_are_skipped_with_a_warning(paths, rt):
    with pytest.warns(UserWarning, match="Specified provider 'CUDAExecutionProvider' is not in available provider names"):
        session = rt.InferenceSession(paths["symbolic"], providers=[("CUDAExecutionProvider", {"device_id": 0}),
                                                                    ("CPUExecutionProvider", {"arena": 1})])
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert session.get_provider_options() == {"CPUExecutionProvider": {}}  # neither reads CPU options
    assert "CPUExecutionProvider" in rt.get_available_providers()
    assert rt.get_device() == "CPU"
    session.set_providers(["CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize("providers,options,message", [
    (["CPUExecutionProvider"], [{}, {}], "'providers' and 'provider_options' should be the same length if both are given."),
    ([("CPUExecutionProvider", {})], [{}], "Only string values for 'providers' are supported if 'provider_options' is given."),
    ([3], None, "'providers' values must be either strings or (string, dict) tuples."),
    (["CPUExecutionProvider"], ["x"], "'provider_options' values must be dicts."),
])
def test_bad_provider_arguments_fall_back_to_the_cpu(paths, providers, options, message, capsys):
    """onnxruntime prints the error and makes the session on its fallback provider, the CPU."""
    printed = {}
    for rt in (onnxruntime, kiln):
        session = rt.InferenceSession(paths["symbolic"], providers=providers, provider_options=options)
        assert session.get_providers() == ["CPUExecutionProvider"]
        printed[rt.__name__] = capsys.readouterr().out
        assert f"EP Error {message} when using {providers}" in printed[rt.__name__]
    assert printed["kiln"] == printed["onnxruntime"]
    with pytest.raises(ValueError, match="should be the same length"):
        session = kiln.InferenceSession(paths["symbolic"])
        session.disable_fallback()
        session.set_providers(["CPUExecutionProvider"], [{}, {}])


# ---- using kiln in place of onnxruntime ----------------------------------------------------------

def test_import_kiln_as_onnxruntime(paths):
    import kiln as onnxruntime_alias  # what a user's `import kiln as onnxruntime` gives

    ort = typical_program(onnxruntime, paths["symbolic"], FEEDS["symbolic"])
    ours = typical_program(onnxruntime_alias, paths["symbolic"], FEEDS["symbolic"])
    np.testing.assert_allclose(ours["results"][0], ort["results"][0], rtol=1e-5, atol=1e-6)


SUBSTITUTED = r'''
import sys, numpy as np, kiln
sys.modules["onnxruntime"] = kiln
import onnxruntime
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from onnxruntime.capi import _pybind_state as C
import onnxruntime.capi._pybind_state
assert onnxruntime is kiln and onnxruntime.InferenceSession is kiln.InferenceSession
assert InvalidArgument is kiln.InvalidArgument, "one class, whichever name imported it"
assert "CPUExecutionProvider" in C.get_available_providers()
session = onnxruntime.InferenceSession(sys.argv[1], providers=onnxruntime.get_available_providers())
try:
    session.run(None, {"x": np.zeros((1, 4), np.float64)})
except InvalidArgument as e:
    print("caught", type(e).__name__)
print(session.run(None, {"x": np.ones((1, 4), np.float32)})[0].shape)
'''


def test_sys_modules_substitution(paths):
    result = subprocess.run([sys.executable, "-c", SUBSTITUTED, paths["symbolic"]], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["caught InvalidArgument", "(1, 3)"]


def test_version_functions():
    assert kiln.get_version_string() == kiln.__version__
    kiln.set_default_logger_severity(3)
    with pytest.raises(kiln.InvalidArgument):
        kiln.set_default_logger_severity(9)


def test_module_functions_packages_call_exist_where_onnxruntime_has_them():
    """magika, for one, calls onnxruntime.disable_telemetry_events() before making its session."""
    for name in ("disable_telemetry_events", "enable_telemetry_events", "get_available_providers", "get_all_providers",
                 "get_device", "get_version_string", "set_default_logger_severity", "set_default_logger_verbosity"):
        assert callable(getattr(onnxruntime, name)) and callable(getattr(onnxruntime.capi._pybind_state, name)), name
        assert callable(getattr(kiln, name)) and callable(getattr(kiln.capi._pybind_state, name)), name
    kiln.disable_telemetry_events()
    kiln.enable_telemetry_events()
