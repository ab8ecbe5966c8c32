"""Driving the persistent benchmark workers (kiln bench --serve and bench/ort_worker.py).

Both speak the same protocol: they print {"event":"started"} and wait; `load` opens the model;
`run K` times K runs; `quit` exits. Memory is read from /proc/PID/status: VmRSS at "started" is the
baseline (runtime and interpreter loaded, no model), VmHWM before `quit` the peak.
"""
import ctypes
import json
import pathlib
import signal
import subprocess
import sys
import tempfile

BENCH_DIR = pathlib.Path(__file__).resolve().parent


class WorkerError(RuntimeError):
    pass


def _die_with_parent():
    """In the child before exec: get SIGTERM when the harness dies, so no worker outlives it mid-batch."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _status_kib(pid, field):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise WorkerError(f"/proc/{pid}/status has no {field}")


class Worker:
    """One engine's worker process; `name` labels its errors."""

    def __init__(self, name, command):
        self.name = name
        self.command = command
        # stderr goes to a file: a pipe nobody reads could fill up and block the worker
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, bufsize=1,
                                        preexec_fn=_die_with_parent)
        self._expect("started")
        self.baseline_kib = _status_kib(self.process.pid, "VmRSS")

    def _expect(self, event):
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=30)
            raise WorkerError(f"{self.name} worker exited (code {self.process.returncode}) instead of '{event}': "
                              f"{' '.join(map(str, self.command))}\n{self._stderr_text()}")
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise WorkerError(f"{self.name} worker printed '{line.strip()}', not a JSON line") from None
        if message.get("event") == "error":
            raise WorkerError(f"{self.name} worker failed: {message.get('message')}\n{self._stderr_text()}".rstrip())
        if message.get("event") != event:
            raise WorkerError(f"{self.name} worker answered {message}, expected event '{event}'")
        return message

    def _stderr_text(self):
        self.stderr.seek(0)
        return self.stderr.read()

    def _send(self, command, event):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._expect(event)

    def load(self):
        return self._send("load", "loaded")

    def run(self, count):
        """Latencies in ms of `count` runs."""
        return self._send(f"run {count}", "ran")["latencies_ms"]

    def peak_kib(self):
        return _status_kib(self.process.pid, "VmHWM")

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def input_args(input_files):
    return [f"--input={name}={path}" for name, path in input_files.items()]


def kiln_worker(kiln, model, threads, input_files):
    return Worker("kiln", [str(kiln), "bench", str(model), "--serve", "--threads", str(threads),
                           *input_args(input_files)])


def ort_worker(model, threads, input_files):
    return Worker("ORT", [sys.executable, str(BENCH_DIR / "ort_worker.py"), str(model), "--threads", str(threads),
                          *input_args(input_files)])
