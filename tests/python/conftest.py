"""Shared pytest configuration for kiln's Python tests.

Run with the repo venv: .venv/bin/python -m pytest tests/python
The build directory is $KILN_BUILD_DIR if set, else <repo>/build.
"""
import os
import pathlib
import subprocess

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "heavy: large model, slow to run; runs by default, deselect with -m 'not heavy'"
    )


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def build_dir():
    return pathlib.Path(os.environ.get("KILN_BUILD_DIR", REPO_ROOT / "build")).resolve()


@pytest.fixture(scope="session")
def kiln(build_dir):
    """Path of the kiln binary; skips the requesting test when it has not been built."""
    path = build_dir / "kiln"
    if not path.is_file():
        pytest.skip(f"kiln binary not built: {path} does not exist")
    return path


EXPORT_TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def model_exporter(repo_root, build_dir):
    """A function that exports (or reuses) PyTorch models by name and returns their directory.

    The export runs tests/models/export_models.py under Debian's /usr/bin/python3 (torch 1.13),
    kept apart from the test venv's numpy 2."""
    out = build_dir / "models"

    def export(names):
        script = repo_root / "tests/models/export_models.py"
        command = ["/usr/bin/python3", str(script), "--out", str(out), "--only", *names]
        result = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
        if result.returncode != 0:
            pytest.fail(f"model export failed: {' '.join(command)}\n{result.stdout}{result.stderr}", pytrace=False)
        return out

    return export


@pytest.fixture(scope="session")
def opset_matrix(repo_root, build_dir):
    """The folder of tests/models/export_opset_matrix.py's models (one network at opsets 9-17),
    exported under Debian's /usr/bin/python3 (torch 1.13)."""
    out = build_dir / "models" / "opset_matrix"
    command = ["/usr/bin/python3", str(repo_root / "tests/models/export_opset_matrix.py"), "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail(f"export failed: {' '.join(command)}\n{result.stdout}{result.stderr}", pytrace=False)
    return out
