"""The GIL is released while kiln runs: Python threads sharing one session, or each with its own,
get exactly the single-thread results."""
import threading
import time

import numpy as np
import pytest

import kiln
import python_api_models as models

THREADS = 4
RUNS_PER_THREAD = 8


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return models.symbolic_model(tmp_path_factory.mktemp("threads") / "symbolic.onnx")


def feeds():
    rng = np.random.default_rng(11)
    return [{"x": rng.standard_normal((64, 4)).astype(np.float32)} for _ in range(THREADS * RUNS_PER_THREAD)]


def run_in_threads(session_for_thread, all_feeds):
    results = [None] * len(all_feeds)
    errors = []

    def work(t):
        try:
            session = session_for_thread(t)
            for i in range(t, len(all_feeds), THREADS):
                results[i] = session.run(None, all_feeds[i])[0]
        except Exception as e:  # reported by the test, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_threads_sharing_one_session_match_one_thread(model_path):
    all_feeds = feeds()
    options = kiln.SessionOptions()
    options.intra_op_num_threads = 1
    session = kiln.InferenceSession(model_path, options)
    expected = [session.run(None, f)[0] for f in all_feeds]
    for got, want in zip(run_in_threads(lambda t: session, all_feeds), expected):
        np.testing.assert_array_equal(got, want)


def test_threads_with_their_own_sessions_match_one_thread(model_path):
    all_feeds = feeds()
    reference = kiln.InferenceSession(model_path)
    expected = [reference.run(None, f)[0] for f in all_feeds]
    sessions = [kiln.InferenceSession(model_path) for _ in range(THREADS)]
    for got, want in zip(run_in_threads(lambda t: sessions[t], all_feeds), expected):
        np.testing.assert_array_equal(got, want)


def test_python_runs_while_kiln_computes(repo_root):
    """While one thread is inside run() on a large model, another thread executes Python code and
    finishes before the run does: possible only if run() released the GIL."""
    session = kiln.InferenceSession(str(repo_root / "models" / "srcnn.onnx"))
    x = np.random.default_rng(0).random((1, 3, 256, 256), dtype=np.float32)
    session.run(None, {"input": x})  # warm: the timed run below has no first-run work
    started, finished = threading.Event(), threading.Event()

    def infer():
        started.set()
        session.run(None, {"input": x})
        finished.set()

    worker = threading.Thread(target=infer)
    worker.start()
    started.wait()
    time.sleep(0.02)  # lets the worker enter run(); with the GIL held there, this sleep outlasts the run
    total = sum(range(1000))  # Python work, which needs the GIL
    still_running = not finished.is_set()
    worker.join()
    assert total == 499500
    assert still_running, "the Python thread could not run until run() returned: the GIL was held"
