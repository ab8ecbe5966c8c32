"""kiln.serve.ray on a local Ray cluster the test starts itself (ray start --head on 127.0.0.1,
stopped at the end): two replicas that load one plan file built once, reached with tritonclient
through Ray Serve's HTTP proxy, give the outputs of a direct Session run."""
import concurrent.futures
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import kiln

from serve_models import add_model, batching_config
from serve_process import free_port

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
tritonclient_http = pytest.importorskip("tritonclient.http")
kiln_ray = pytest.importorskip("kiln.serve.ray")

CLUSTER_START_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node cluster on 127.0.0.1 in its own temp folder; `ray start --block` stops the
    processes it started when it gets SIGTERM."""
    temp_dir = tempfile.mkdtemp(prefix="kray")  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    command = [str(pathlib.Path(sys.executable).parent / "ray"), "start", "--head", "--block",
               "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=4", "--include-dashboard=false",
               "--disable-usage-stats", f"--temp-dir={temp_dir}", "--object-store-memory=100000000"]
    log = open(pathlib.Path(temp_dir) / "ray-start.log", "w")
    head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S
        while True:
            if head.poll() is not None:
                pytest.skip(f"ray cannot start a local cluster on this machine: {(pathlib.Path(temp_dir) / 'ray-start.log').read_text()[-2000:]}")
            try:
                ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
                break
            except (ConnectionError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        yield
    finally:
        if ray.is_initialized():
            serve.shutdown()
            ray.shutdown()
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repository")
    add_model(repo, "mlp", batching_config("mlp", max_batch_size=8, preferred=(4, 8), delay_us=2000))
    return repo


@pytest.fixture(scope="module")
def deployed(ray_cluster, repository, tmp_path_factory):
    plan_dir = tmp_path_factory.mktemp("plans")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(kiln_ray.app(repository, plan_dir=plan_dir, num_replicas=2, threads=1), name="kiln", route_prefix="/")
    return f"127.0.0.1:{port}", plan_dir


def test_two_replicas_share_one_plan_file(deployed):
    _, plan_dir = deployed
    plan = plan_dir / "mlp" / "1" / "model.kiln"
    assert plan.is_file() and plan.read_bytes()[:8] == b"KILNPLAN"
    status = serve.status().applications["kiln"].deployments["KilnDeployment"]
    assert status.replica_states.get("RUNNING") == 2


def test_ray_replicas_answer_tritonclient_like_a_session(deployed, repository):
    address, _ = deployed
    session = kiln.InferenceSession(str(repository / "mlp" / "1" / "model.onnx"))

    def client_loop(seed):
        rng = np.random.default_rng(seed)
        worst = 0.0
        with tritonclient_http.InferenceServerClient(address) as c:
            assert c.is_server_live() and c.is_model_ready("mlp")
            assert c.get_model_metadata("mlp")["platform"] == "kiln_plan"  # the replica loaded the plan
            for i in range(25):
                x = rng.standard_normal((int(rng.integers(1, 4)), 16)).astype(np.float32)
                inp = tritonclient_http.InferInput("x", list(x.shape), "FP32")
                inp.set_data_from_numpy(x, binary_data=bool(i % 2))
                result = c.infer("mlp", [inp], outputs=[tritonclient_http.InferRequestedOutput(n, binary_data=bool(i % 2)) for n in ("y", "z")])
                y, z = session.run(None, {"x": x})
                assert result.as_numpy("y").shape == y.shape and result.as_numpy("z").shape == z.shape
                worst = max(worst, float(np.abs(result.as_numpy("y") - y).max()), float(np.abs(result.as_numpy("z") - z).max()))
        return worst

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        errors = list(pool.map(client_loop, range(4)))
    assert max(errors) < 1e-5
