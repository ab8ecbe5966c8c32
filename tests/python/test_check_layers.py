"""scripts/check_layers.py: passes on the tree as it is, and fails naming the file, the line and
both layers when an include goes up the layers (planted in a temporary copy of src/)."""
import shutil
import subprocess
import sys

import pytest

CHAIN = "core -> ir -> plugin -> backends/cpu -> engine -> opt -> build -> onnx -> session"


def run_check(root, script):
    return subprocess.run([sys.executable, str(script), "--root", str(root)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture()
def tree_copy(tmp_path, repo_root):
    for part in ("src", "include"):
        shutil.copytree(repo_root / part, tmp_path / part)
    return tmp_path


@pytest.fixture()
def script(repo_root):
    return repo_root / "scripts" / "check_layers.py"


def plant(path, include_line, at_line):
    lines = path.read_text().splitlines(keepends=True)
    lines.insert(at_line - 1, include_line + "\n")
    path.write_text("".join(lines))


def test_the_tree_keeps_its_layers(repo_root, script):
    result = run_check(repo_root, script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every include goes down the layers" in result.stdout


def test_an_upward_include_fails_naming_file_line_and_layers(tree_copy, script):
    plant(tree_copy / "src" / "backends" / "cpu" / "kernels" / "control_flow.cpp", '#include "engine/subgraph.h"', 5)
    result = run_check(tree_copy, script)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        'src/backends/cpu/kernels/control_flow.cpp:5: layer backends/cpu includes "engine/subgraph.h" from layer '
        f"engine, which is above it (layers, bottom up: {CHAIN})"
    ]
    assert "1 include(s) against the layers" in result.stderr


def test_the_lowest_layer_may_not_include_the_highest(tree_copy, script):
    plant(tree_copy / "src" / "core" / "tensor.cpp", '#  include "session/onnx_parser.cpp"', 2)
    result = run_check(tree_copy, script)
    assert result.returncode == 1
    assert 'src/core/tensor.cpp:2: layer core includes "session/onnx_parser.cpp" from layer session' in result.stdout


def test_example_plugins_may_not_include_kiln_internals(tree_copy, script):
    plant(tree_copy / "src" / "plugins" / "myselu_compute.cpp", '#include "backends/cpu/thread_pool.h"', 3)
    result = run_check(tree_copy, script)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        'src/plugins/myselu_compute.cpp:3: the example plugins (src/plugins) include "backends/cpu/thread_pool.h" '
        "from src/; they may use only the public API (include/kiln) and their own headers"
    ]


def test_downward_public_and_system_includes_pass(tree_copy, script):
    path = tree_copy / "src" / "session" / "session.cpp"
    plant(path, '#include "core/half.h"', 1)
    plant(path, '#include "kiln/engine.h"', 1)
    plant(path, '#include "google/protobuf/message.h"', 1)
    plant(tree_copy / "src" / "plugins" / "myselu_plugin.cpp", '#include "kiln/tensor.h"', 1)
    result = run_check(tree_copy, script)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_runtime_header_may_not_reach_the_build_time_api(tree_copy, script):
    # Planted in a header engine.h includes: the walk follows kiln's own includes.
    plant(tree_copy / "include" / "kiln" / "optimization_profile.h", '#include "kiln/network.h"', 10)
    result = run_check(tree_copy, script)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        'include/kiln/optimization_profile.h:10: the runtime header kiln/engine.h reaches "kiln/network.h", '
        "part of the build-time API; the runtime must not depend on it"
    ]
