"""Starts `kiln serve` on 127.0.0.1 and a free port for the serving tests and bench/serve_bench.py,
and stops it with SIGTERM."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

START_TIMEOUT_S = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, headers=None, timeout=60):
    """(status, body bytes, headers) of one request; no exception for 4xx/5xx."""
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


class Server:
    def __init__(self, kiln, repository, *args, log_path=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.address = f"127.0.0.1:{self.port}"
        env = dict(os.environ, KILN_PYTHON=sys.executable)
        self._log = open(log_path, "w") if log_path else subprocess.DEVNULL
        command = [str(kiln), "serve", str(repository), "--host", "127.0.0.1", "--http-port", str(self.port), *args]
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kiln serve exited with {self.process.returncode} before it listened: {command}")
            with contextlib.suppress(OSError):
                if http("GET", self.url + "/v2/health/live", timeout=2)[0] == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"kiln serve did not answer within {START_TIMEOUT_S} s: {command}")

    def stop(self, timeout=60):
        """SIGTERM, then the exit code (killed after the timeout)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        return self.process.returncode
