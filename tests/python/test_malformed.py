"""The malformed-input corpus (tests/malformed/cases_*.py): every case's kiln command must exit with
its code and message, within a time limit and with its peak memory bounded (docs/reliability.md)."""
import importlib
import os
import pathlib
import resource
import signal
import subprocess
import sys

import pytest

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "malformed"
sys.path.insert(0, str(CORPUS))

TIMEOUT_S = 30
# Address space the child may map: a request that slips past kiln's size checks fails in the child
# (and the message check then fails) instead of paging the test machine to death.
ADDRESS_SPACE_LIMIT = 8 << 30
PEAK_RSS_LIMIT_KIB = 512 << 10


def load_cases():
    cases = []
    for path in sorted(CORPUS.glob("cases_*.py")):
        cases += importlib.import_module(path.stem).CASES
    return cases


CASES = load_cases()


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


# Runs argv[2:] and writes its peak RSS (KiB) to argv[1]. kiln is started from this small process, not
# from pytest's, because a child's ru_maxrss starts at its parent's RSS when it forks (the high-water
# mark survives exec), and pytest's grows past the limit once the model tests have run.
MEASURE_PEAK = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.WEXITSTATUS(status))
"""


def run_bounded(command, cwd):
    """Runs `command`; returns (exit code, stdout + stderr, peak RSS in KiB of that command alone)."""
    log = cwd / "kiln-output.txt"
    peak = cwd / "kiln-peak-rss.txt"
    with open(log, "wb") as out:
        child = subprocess.Popen([sys.executable, "-c", MEASURE_PEAK, str(peak), *command], cwd=cwd, stdout=out,
                                 stderr=subprocess.STDOUT, preexec_fn=limit_address_space, start_new_session=True)
    try:
        child.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        pytest.fail(f"{' '.join(command)} ran past {TIMEOUT_S} s", pytrace=False)
    return child.returncode, log.read_bytes().decode(errors="backslashreplace"), int(peak.read_text())


def case_param(case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [case_param(c) for c in CASES])
def test_malformed_input(kiln, tmp_path, monkeypatch, case):
    monkeypatch.setenv("KILN", str(kiln))  # for cases that build a plan first
    command = [str(kiln), *map(str, case.make(tmp_path))]
    code, out, peak_kib = run_bounded(command, tmp_path)
    assert code == case.exit_code, f"exit {code}, expected {case.exit_code}:\n{out}"
    missing = [w for w in case.words if w not in out]
    assert not missing, f"missing {missing} in:\n{out}"
    assert peak_kib < PEAK_RSS_LIMIT_KIB, f"peak RSS {peak_kib} KiB:\n{out}"
