"""`kiln bench --trace` (Chrome-trace JSON, one event per layer per run) and `--export-times`."""
import collections
import json
import subprocess

import pytest

from compare_models import resnet_style_model


def test_trace_has_one_event_per_layer_per_run_and_times_one_entry_per_run(kiln, tmp_path):
    model = resnet_style_model(tmp_path / "resnet.onnx")
    trace, times = tmp_path / "trace.json", tmp_path / "times.json"
    r = subprocess.run([str(kiln), "bench", str(model), "--warmup", "2", "--iterations", "4", "--profile", "--json",
                        "--trace", str(trace), "--export-times", str(times)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    layers = [layer["name"] for layer in json.loads(r.stdout)["layers"]]  # the engine's layers, as --profile saw them
    assert len(layers) >= 5
    events = json.loads(trace.read_text())
    runs = [e for e in events if e["cat"] == "Session"]
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(runs) == 4 and all(e["name"] == "model_run" for e in runs)
    assert collections.Counter(e["name"] for e in nodes) == {name: 4 for name in layers}
    for e in nodes:
        assert e["ph"] == "X" and e["dur"] >= 0 and isinstance(e["tid"], int) and isinstance(e["pid"], int)
        assert e["args"]["op_name"] and e["args"]["input_shapes"] and e["args"]["kernel"]
        # Each layer lies inside a run (a little slack for the clock's rounding, so an event at the boundary
        # of two back-to-back runs may fit both; the counts above give each layer one event per run).
        assert any(r["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1 for r in runs)
    for name in layers:  # a layer runs the kernel its engine chose, every run
        assert len({e["args"]["kernel"] for e in nodes if e["name"] == name}) == 1
    entries = json.loads(times.read_text())
    assert len(entries) == 4 and entries[0]["startMs"] == 0
    for before, after in zip(entries, entries[1:]):
        assert after["startMs"] >= before["endMs"]
    for entry in entries:
        assert entry["latencyMs"] == pytest.approx(entry["endMs"] - entry["startMs"], abs=1e-6)
        assert entry["computeMs"] == entry["latencyMs"] > 0
