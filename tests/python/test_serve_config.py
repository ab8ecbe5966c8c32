"""kiln.serve's reading of Triton model configs (config.pbtxt, config.json) and version policies."""
import logging

import pytest

from kiln.serve.model_config import ConfigError, config_to_dict, read_model_config
from kiln.serve.repository import select_versions

TRITON_CONFIG = """
name: "resnet"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "input" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [ 1000 ] } ]
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 500 }
instance_group [ { count: 2 kind: KIND_CPU } ]
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }
parameters { key: "precision" value: { string_value: "bf16" } }
"""


def test_pbtxt_as_triton_writes_it(tmp_path, caplog):
    (tmp_path / "config.pbtxt").write_text(TRITON_CONFIG)
    with caplog.at_level(logging.WARNING, logger="kiln.serve"):
        config = read_model_config(tmp_path)
    assert config.max_batch_size == 8
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert config.instance_group[0].count == 2
    assert config.input[0].name == "input" and list(config.input[0].dims) == [3, 224, 224]
    assert config.parameters["precision"].string_value == "bf16"
    assert 'has no field named "optimization"' in caplog.text and "config.pbtxt" in caplog.text


def test_json_config_is_the_same_message(tmp_path):
    (tmp_path / "config.json").write_text('{"max_batch_size": 4, "dynamic_batching": {"preferredBatchSize": [2, 4]},'
                                          ' "input": [{"name": "x", "data_type": "TYPE_INT64", "dims": [-1]}]}')
    config = read_model_config(tmp_path)
    assert config.max_batch_size == 4 and list(config.dynamic_batching.preferred_batch_size) == [2, 4]
    assert config_to_dict(config)["input"] == [{"name": "x", "data_type": "TYPE_INT64", "dims": ["-1"]}]


def test_config_errors_name_the_file(tmp_path):
    (tmp_path / "config.pbtxt").write_text("max_batch_size: 4\n")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="both config.pbtxt and config.json are present"):
        read_model_config(tmp_path)
    (tmp_path / "config.json").unlink()
    (tmp_path / "config.pbtxt").write_text("max_batch_size: four\n")
    with pytest.raises(ConfigError, match=r"config.pbtxt: 1:17 : .*max_batch_size"):
        read_model_config(tmp_path)


@pytest.mark.parametrize("policy, expected", [
    ("", ["3"]),
    ("version_policy: { latest { num_versions: 2 } }", ["2", "3"]),
    ("version_policy: { all { } }", ["1", "2", "3"]),
    ("version_policy: { specific { versions: [ 3, 1 ] } }", ["1", "3"]),
])
def test_version_policies(tmp_path, policy, expected):
    for v in ("1", "2", "3", "notaversion"):
        (tmp_path / v).mkdir()
    (tmp_path / "config.pbtxt").write_text(policy)
    assert select_versions(tmp_path, read_model_config(tmp_path)) == expected


def test_version_policy_errors(tmp_path):
    with pytest.raises(ValueError, match="no version folder"):
        select_versions(tmp_path, read_model_config(tmp_path))
    (tmp_path / "1").mkdir()
    (tmp_path / "config.pbtxt").write_text("version_policy: { specific { versions: [ 1, 4 ] } }")
    with pytest.raises(ValueError, match=r"version_policy names versions \[4\] that have no folder"):
        select_versions(tmp_path, read_model_config(tmp_path))
