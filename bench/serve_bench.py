"""Throughput and latency of `kiln serve` with dynamic batching on and off, beside the same load
on a direct InferenceSession loop (no HTTP). Not a test: it prints figures (docs/performance.md).

    .venv/bin/python bench/serve_bench.py [--clients 8] [--requests 200] [--kiln build/kiln]

The model is an MLP whose weights (8 MiB) make one-row runs bound by memory traffic, the case
batching is for: a batch of rows reads the weights once. Each client sends one row per request,
waits for the answer, and sends the next (closed loop); tritonclient's HTTP client with binary
tensors, as Triton's perf_analyzer does.
"""
import argparse
import concurrent.futures
import pathlib
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

from serve_models import add_model, batching_config  # noqa: E402
from serve_process import Server  # noqa: E402

INPUTS, HIDDEN, OUTPUTS = 512, 2048, 512


def closed_loop(clients, requests, send):
    """Runs `requests` calls of send(x) on each of `clients` threads; (seconds, latencies in s)."""
    def client(seed):
        x = np.random.default_rng(seed).standard_normal((1, INPUTS)).astype(np.float32)
        latencies = []
        for _ in range(requests):
            start = time.perf_counter()
            send(x)
            latencies.append(time.perf_counter() - start)
        return latencies

    send(np.zeros((1, INPUTS), np.float32))  # warm-up
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        latencies = [t for result in pool.map(client, range(clients)) for t in result]
    return time.perf_counter() - start, latencies


def report(name, runs):
    """One line per mode over its rounds: the median throughput, p50/p99 of every latency."""
    rates = [len(latencies) / seconds for seconds, latencies in runs]
    ms = np.array([t for _, latencies in runs for t in latencies]) * 1e3
    spread = f"(rounds {min(rates):.0f}..{max(rates):.0f})" if len(runs) > 1 else ""
    print(f"{name:<28} {np.median(rates):9.1f} req/s {spread:<18} p50 {np.percentile(ms, 50):7.2f} ms   p99 {np.percentile(ms, 99):7.2f} ms")
    return float(np.median(rates))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=200, help="requests per client")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads of the model (0: one per core)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the three modes, interleaved (the load of a shared machine varies)")
    p.add_argument("--kiln", type=pathlib.Path, default=ROOT / "build" / "kiln")
    args = p.parse_args()

    import tritonclient.http as th

    import kiln

    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp) / "repository"
        sizes = dict(inputs=INPUTS, hidden=HIDDEN, outputs=OUTPUTS)
        model = add_model(repo, "unbatched", **sizes)
        add_model(repo, "batched", batching_config("batched", max_batch_size=16, preferred=(args.clients,), delay_us=2000), **sizes)
        print(f"{args.clients} clients x {args.requests} requests of 1 row, MLP {INPUTS}-{HIDDEN}-{OUTPUTS}, threads {args.threads}")

        options = kiln.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = kiln.InferenceSession(str(model), options)
        runs = {"direct": [], "unbatched": [], "batched": []}
        server = Server(args.kiln, repo, "--threads", str(args.threads), "--log-level", "warning")
        try:
            senders = {"direct": lambda x: session.run(None, {"x": x})}
            for name in ("unbatched", "batched"):
                local = threading.local()

                def send(x, name=name, local=local):
                    if not hasattr(local, "client"):
                        local.client = th.InferenceServerClient(server.address)
                    inp = th.InferInput("x", list(x.shape), "FP32")
                    inp.set_data_from_numpy(x)
                    local.client.infer(name, [inp], outputs=[th.InferRequestedOutput("y")])

                senders[name] = send
            for _ in range(args.rounds):
                for name, send in senders.items():
                    runs[name].append(closed_loop(args.clients, args.requests, send))
        finally:
            server.stop()
        direct = report("direct Session loop", runs["direct"])
        results = {name: report("kiln serve, batching " + ("on" if name == "batched" else "off"), runs[name])
                   for name in ("unbatched", "batched")}
        print(f"batching on / off: {results['batched'] / results['unbatched']:.2f}x; "
              f"batching on / direct Session loop: {results['batched'] / direct:.2f}x")


if __name__ == "__main__":
    main()
