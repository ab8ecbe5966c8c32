"""kiln serve with Triton's own HTTP client (tritonclient): outputs equal a direct Session run, the
v2 endpoints answer as the protocol says, and 8 concurrent clients on a batching model each get
exactly their own rows (docs/serving.md)."""
import concurrent.futures
import json
import shutil
import signal

import numpy as np
import pytest

import kiln
from kiln.serve.plans import build_plan
from kiln.serve.repository_plans import build_plans

from onnx import TensorProto
from python_api_models import identity_model, string_model
from serve_models import add_model, batching_config, mlp_model
from serve_process import Server, http

tritonclient_http = pytest.importorskip("tritonclient.http")

CLIENTS = 8
ELEMENT_TYPES = {"FP16": TensorProto.FLOAT16, "FP64": TensorProto.DOUBLE, "INT64": TensorProto.INT64,
                 "INT8": TensorProto.INT8, "UINT8": TensorProto.UINT8, "BOOL": TensorProto.BOOL}
REQUESTS_PER_CLIENT = 200


@pytest.fixture(scope="module")
def repository(tmp_path_factory, repo_root):
    repo = tmp_path_factory.mktemp("repository")
    add_model(repo, "mlp", batching_config("mlp", max_batch_size=16, preferred=(8, 16), delay_us=2000, instances=2))
    add_model(repo, "plain")  # no config: one request at a time
    srcnn = repo / "srcnn" / "1"
    srcnn.mkdir(parents=True)
    shutil.copy(repo_root / "models" / "srcnn.onnx", srcnn / "model.onnx")
    # A plan built once from the same ONNX model, served from model.kiln with batching.
    onnx_path = mlp_model(tmp_path_factory.mktemp("onnx") / "mlp.onnx")
    (repo / "planned" / "1").mkdir(parents=True)
    plan = build_plan(onnx_path, max_batch_size=8, opt_batch_size=4, precision="fp32", threads=1)
    (repo / "planned" / "1" / "model.kiln").write_bytes(plan)
    (repo / "planned" / "config.pbtxt").write_text(batching_config("planned", max_batch_size=8, preferred=(4,), delay_us=1000))
    # An ONNX model the server builds into an FP16 plan at load (kiln's precision parameter).
    add_model(repo, "half", batching_config("half", max_batch_size=8, preferred=(4,), delay_us=1000)
              + 'parameters { key: "precision" value: { string_value: "fp16" } }\n')
    add_model(repo, "strings", maker=string_model)
    for name, element_type in ELEMENT_TYPES.items():
        add_model(repo, f"identity_{name.lower()}", maker=lambda path, t=element_type: identity_model(path, t))
    # Two versions: the latest is served by default.
    add_model(repo, "versioned", version="1", seed=1)
    add_model(repo, "versioned", version="2", seed=2)
    return repo


@pytest.fixture(scope="module")
def server(kiln, repository, tmp_path_factory):
    s = Server(kiln, repository, "--threads", "1", log_path=tmp_path_factory.mktemp("log") / "serve.log")
    yield s
    assert s.stop() == -signal.SIGTERM  # uvicorn drains, then exits by the signal it caught


@pytest.fixture(scope="module")
def client(server):
    with tritonclient_http.InferenceServerClient(server.address, concurrency=1) as c:
        yield c


def session_outputs(repository, model, feed, version="1"):
    session = kiln.InferenceSession(str(repository / model / version / "model.onnx"))
    return session.run(None, feed)


def triton_infer(client, model, x, outputs=None, binary=True, version=""):
    inp = tritonclient_http.InferInput("x" if model != "srcnn" else "input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    requested = [tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in outputs] if outputs else None
    return client.infer(model, [inp], outputs=requested, model_version=version)


def test_tritonclient_srcnn_equals_session(client, repository):
    x = np.random.default_rng(0).random((1, 3, 256, 256), dtype=np.float32)
    (expected,) = session_outputs(repository, "srcnn", {"input": x})
    result = triton_infer(client, "srcnn", x)
    output_name = result.get_response()["outputs"][0]["name"]
    np.testing.assert_array_equal(result.as_numpy(output_name), expected)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_tritonclient_outputs_equal_session(client, repository, binary):
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    y, z = session_outputs(repository, "mlp", {"x": x})
    for model in ("mlp", "plain"):
        result = triton_infer(client, model, x, outputs=["y", "z"], binary=binary)
        np.testing.assert_array_equal(result.as_numpy("y"), y)
        np.testing.assert_array_equal(result.as_numpy("z"), z)
        only_z = triton_infer(client, model, x, outputs=["z"], binary=binary)
        assert [o["name"] for o in only_z.get_response()["outputs"]] == ["z"]


def test_plan_model_equals_session(client, repository):
    x = np.random.default_rng(2).standard_normal((5, 16)).astype(np.float32)
    y, z = session_outputs(repository, "mlp", {"x": x})
    result = triton_infer(client, "planned", x, outputs=["y", "z"])
    np.testing.assert_allclose(result.as_numpy("y"), y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy("z"), z, rtol=1e-5, atol=1e-5)
    assert client.get_model_metadata("planned")["platform"] == "kiln_plan"


def test_precision_parameter_builds_a_plan(client, repository):
    x = np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)
    y, _ = session_outputs(repository, "mlp", {"x": x})
    result = triton_infer(client, "half", x, outputs=["y"])
    np.testing.assert_allclose(result.as_numpy("y"), y, rtol=2e-2, atol=2e-2)
    assert client.get_model_metadata("half")["platform"] == "kiln_plan"


def test_latest_version_is_served(client, repository):
    x = np.ones((1, 16), np.float32)
    latest = triton_infer(client, "versioned", x, outputs=["y"]).as_numpy("y")
    np.testing.assert_array_equal(latest, session_outputs(repository, "versioned", {"x": x}, version="2")[0])
    assert client.get_model_metadata("versioned")["versions"] == ["2"]
    assert not client.is_model_ready("versioned", "1")
    assert client.is_model_ready("versioned", "2")


def test_health_metadata_config(client, server):
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata()["name"] == "kiln"
    meta = client.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
    assert [o["name"] for o in meta["outputs"]] == ["y", "z"]
    config = client.get_model_config("mlp")
    assert config["max_batch_size"] == 16
    assert config["dynamic_batching"]["preferred_batch_size"] == [8, 16]
    assert config["instance_group"][0]["count"] == 2
    plain = client.get_model_config("plain")  # filled in from the model when there is no config file
    assert [i["name"] for i in plain["input"]] == ["x"] and plain["input"][0]["dims"] == ["-1", "16"]
    names = {(e["name"], e["state"]) for e in client.get_model_repository_index()}
    assert ("mlp", "READY") in names and ("srcnn", "READY") in names


def test_curl_style_json_request(server, repository):
    x = np.arange(16, dtype=np.float32).reshape(1, 16) / 16
    body = {"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": x.ravel().tolist()}]}
    status, content, headers = http("POST", server.url + "/v2/models/mlp/infer", body)
    assert status == 200, content
    response = json.loads(content)
    assert response["id"] == "r1" and response["model_name"] == "mlp" and response["model_version"] == "1"
    y, z = session_outputs(repository, "mlp", {"x": x})
    outputs = {o["name"]: o for o in response["outputs"]}
    assert outputs["y"]["shape"] == [1, 8] and outputs["y"]["datatype"] == "FP32"
    np.testing.assert_array_equal(np.array(outputs["y"]["data"], np.float32).reshape(1, 8), y)
    np.testing.assert_array_equal(np.array(outputs["z"]["data"], np.float32).reshape(1, 32), z)


def test_eight_clients_batched_each_get_their_rows(server, repository):
    session = kiln.InferenceSession(str(repository / "mlp" / "1" / "model.onnx"))
    before = http("GET", server.url + "/v2/models/mlp/stats")[1]
    executions_before = json.loads(before)["model_stats"][0]["execution_count"]

    def client_loop(seed):
        rng = np.random.default_rng(100 + seed)
        mismatches = 0
        with tritonclient_http.InferenceServerClient(server.address) as c:
            for _ in range(REQUESTS_PER_CLIENT):
                x = rng.standard_normal((int(rng.integers(1, 4)), 16)).astype(np.float32)
                result = triton_infer(c, "mlp", x, outputs=["y", "z"])
                y, z = session.run(None, {"x": x})
                ok = result.as_numpy("y").shape == y.shape and np.allclose(result.as_numpy("y"), y, rtol=1e-5, atol=1e-5)
                ok = ok and np.allclose(result.as_numpy("z"), z, rtol=1e-5, atol=1e-5)
                mismatches += not ok
        return mismatches

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        mismatches = list(pool.map(client_loop, range(CLIENTS)))
    assert mismatches == [0] * CLIENTS
    stats = json.loads(http("GET", server.url + "/v2/models/mlp/stats")[1])["model_stats"][0]
    executions = stats["execution_count"] - executions_before
    assert executions < CLIENTS * REQUESTS_PER_CLIENT, "no request was batched with another"
    assert max(b["batch_size"] for b in stats["batch_stats"]) > 3


def test_stats_and_metrics_count_requests(client, server):
    x = np.ones((2, 16), np.float32)
    before = client.get_inference_statistics("plain")["model_stats"][0]
    for _ in range(3):
        triton_infer(client, "plain", x)
    after = client.get_inference_statistics("plain")["model_stats"][0]
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 3
    assert after["inference_count"] - before["inference_count"] == 3  # no batching: one per request, as Triton counts
    assert after["execution_count"] - before["execution_count"] == 3
    assert after["inference_stats"]["compute_infer"]["ns"] > before["inference_stats"]["compute_infer"]["ns"]
    status, text, headers = http("GET", server.url + "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    metrics = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines() if line and line[0] != "#"}
    assert metrics['nv_inference_request_success_total{model="plain",version="1"}'] == after["inference_stats"]["success"]["count"]
    assert metrics['nv_inference_count_total{model="plain",version="1"}'] == after["inference_count"]
    assert 'nv_inference_queue_duration_us_total{model="mlp",version="1"}' in metrics
    assert 'nv_inference_compute_infer_duration_us_total{model="mlp",version="1"}' in metrics


def test_plan_dir_serves_plans_built_once(kiln, tmp_path):
    repo = tmp_path / "repository"
    add_model(repo, "prebuilt", "max_batch_size: 8\n")
    add_model(repo, "dynamic")  # a variable batch dim and no max_batch_size: no plan, served from ONNX
    outcome = build_plans(repo, tmp_path / "plans")
    assert outcome["prebuilt/1"] == "built"
    assert outcome["dynamic/1"].startswith("not built: ") and "a plan needs max_batch_size > 0" in outcome["dynamic/1"]
    assert (tmp_path / "plans" / "prebuilt" / "1" / "model.kiln").read_bytes()[:8] == b"KILNPLAN"
    server = Server(kiln, repo, "--plan-dir", str(tmp_path / "plans"))
    try:
        with tritonclient_http.InferenceServerClient(server.address) as c:
            assert c.get_model_metadata("prebuilt")["platform"] == "kiln_plan"
            assert c.get_model_metadata("dynamic")["platform"] == "kiln_onnx"
            x = np.random.default_rng(4).standard_normal((3, 16)).astype(np.float32)
            y, _ = session_outputs(repo, "prebuilt", {"x": x})
            np.testing.assert_allclose(triton_infer(c, "prebuilt", x, outputs=["y"]).as_numpy("y"), y, rtol=1e-5, atol=1e-5)
    finally:
        server.stop()


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("datatype", list(ELEMENT_TYPES))
def test_element_types_round_trip(client, datatype, binary):
    x = (np.random.default_rng(5).standard_normal((2, 3)) * 50).astype(tritonclient_http.triton_to_np_dtype(datatype))
    inp = tritonclient_http.InferInput("x", [2, 3], datatype)
    inp.set_data_from_numpy(x, binary_data=binary)
    result = client.infer(f"identity_{datatype.lower()}", [inp], outputs=[tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in ("y", "z")])
    for name in ("y", "z"):
        assert result.as_numpy(name).dtype == x.dtype
        np.testing.assert_array_equal(result.as_numpy(name), x)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_tensors(client, binary):
    words = np.array([b"cat", b"dog", "caf\u00e9".encode()], dtype=object)
    inp = tritonclient_http.InferInput("words", [3], "BYTES")
    inp.set_data_from_numpy(words, binary_data=binary)
    outputs = [tritonclient_http.InferRequestedOutput(n, binary_data=binary) for n in ("words_out", "is_cat")]
    result = client.infer("strings", [inp], outputs=outputs)
    assert [w if isinstance(w, bytes) else w.encode() for w in result.as_numpy("words_out")] == list(words)
    np.testing.assert_array_equal(result.as_numpy("is_cat"), [True, False, False])


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests(client, repository, algorithm):
    x = np.random.default_rng(6).standard_normal((2, 16)).astype(np.float32)
    inp = tritonclient_http.InferInput("x", [2, 16], "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer("mlp", [inp], request_compression_algorithm=algorithm)
    np.testing.assert_array_equal(result.as_numpy("y"), session_outputs(repository, "mlp", {"x": x})[0])
