"""The kiln package as pip installs it: version, type stubs, the files of the wheel, and (with
KILN_TEST_FRESH_INSTALL=1, as it takes minutes) `pip install <checkout>` into a new virtual
environment and `pip wheel`."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import kiln

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE_DIR = pathlib.Path(kiln.__file__).parent


def cmake_project_version():
    text = (REPO_ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(kiln VERSION ([0-9.]+)", text).group(1)


def test_version_is_the_cmake_project_version():
    assert kiln.__version__ == cmake_project_version() == kiln._kiln.__version__


def test_the_installed_package_holds_extension_libraries_and_stubs():
    names = {p.name for p in PACKAGE_DIR.iterdir()}
    assert {"libkiln_onnx.so", "libkiln_runtime.so", "_kiln.pyi", "py.typed", "__init__.py"} <= names
    extension = next(PACKAGE_DIR.glob("_kiln*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(extension)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"(RUNPATH|RPATH).*\[\$ORIGIN\]", dynamic), dynamic


def test_the_extension_stub_is_what_nanobind_generates(tmp_path):
    """python/kiln/_kiln.pyi is checked in; regenerate it with
    .venv/bin/python -m nanobind.stubgen -m kiln._kiln -o python/kiln/_kiln.pyi"""
    out = tmp_path / "_kiln.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "kiln._kiln", "-o", str(out)], check=True)
    generated = out.read_text()
    assert generated == (REPO_ROOT / "python" / "kiln" / "_kiln.pyi").read_text()
    assert generated == (PACKAGE_DIR / "_kiln.pyi").read_text()


def test_public_names_have_docstrings():
    undocumented = [name for name in kiln.__all__ if name not in ("__version__", "capi") and not getattr(kiln, name).__doc__]
    assert not undocumented, undocumented
    for cls in (kiln.InferenceSession, kiln.SessionOptions, kiln.IOBinding, kiln.OrtValue, kiln.RunOptions):
        missing = [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_") and not v.__doc__]
        assert not missing, (cls.__name__, missing)


@pytest.mark.heavy
@pytest.mark.skipif(os.environ.get("KILN_TEST_FRESH_INSTALL") != "1", reason="set KILN_TEST_FRESH_INSTALL=1 (takes minutes)")
def test_pip_install_into_a_fresh_venv_and_pip_wheel(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    installed = subprocess.run([*pip, "install", "-q", str(REPO_ROOT)], capture_output=True, text=True, timeout=3600)
    assert installed.returncode == 0, installed.stderr[-4000:]
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import kiln; print(kiln.__version__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True)
    assert probe.stdout.strip() == cmake_project_version()
    wheel = subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheels"), str(REPO_ROOT)],
                           capture_output=True, text=True, timeout=3600)
    assert wheel.returncode == 0, wheel.stderr[-4000:]
    assert list((tmp_path / "wheels").glob(f"kiln-{cmake_project_version()}-*.whl"))
