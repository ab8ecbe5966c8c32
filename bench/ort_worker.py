"""ONNX Runtime benchmark worker: the same stdin/stdout protocol as `kiln bench MODEL --serve`.

    python bench/ort_worker.py MODEL --threads N --input NAME=FILE.npy ...

Prints {"event":"started","pid":P} once onnxruntime and numpy are imported (the harness reads the
baseline RSS then), then answers `load`, `run K` and `quit` with one JSON line each. The session is
sequential, with `--threads` intra-op threads and one inter-op thread.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def reply(message):
    print(json.dumps(message), flush=True)


def open_session(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def read_inputs(specs):
    inputs = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or not path:
            raise ValueError(f"bad --input '{spec}': expected NAME=FILE.npy")
        inputs[name] = np.load(path)
    return inputs


def serve(options):
    session, inputs = None, None
    reply({"event": "started", "pid": os.getpid()})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return 0
        if words[0] == "load":
            start = time.perf_counter()
            session = open_session(options.model, options.threads)
            load_ms = (time.perf_counter() - start) * 1e3
            inputs = read_inputs(options.input)
            described = [{"name": n, "dtype": str(v.dtype), "shape": list(v.shape)} for n, v in inputs.items()]
            reply({"event": "loaded", "model": options.model, "threads": options.threads, "load_ms": load_ms,
                   "inputs": described})
        elif words[0] == "run" and len(words) == 2 and words[1].isdigit() and int(words[1]) >= 1:
            if session is None:
                raise ValueError("'run' before 'load'")
            latencies = []
            for _ in range(int(words[1])):
                start = time.perf_counter()
                session.run(None, inputs)
                latencies.append((time.perf_counter() - start) * 1e3)
            reply({"event": "ran", "latencies_ms": latencies})
        else:
            raise ValueError(f"unknown command '{line.strip()}' (expected load, run K or quit)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeatable)")
    options = parser.parse_args()
    try:
        return serve(options)
    except Exception as error:  # report any failure on the protocol channel, then exit non-zero
        reply({"event": "error", "message": f"{type(error).__name__}: {error}"})
        return 1


if __name__ == "__main__":
    sys.exit(main())
