"""Tactics from Python (the TensorRT-style API): IBuilderConfig.builder_optimization_level and the
timing cache (create_timing_cache / set_timing_cache / serialize)."""
import pytest

import kiln
from test_tactics_cli import conv_net


def build(model, level, cache=None):
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network(1 << int(kiln.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = kiln.OnnxParser(network, logger)
    assert parser.parse_from_file(str(model))
    config = builder.create_builder_config()
    config.num_threads = 1
    config.builder_optimization_level = level
    assert config.builder_optimization_level == level
    if cache is not None:
        assert config.set_timing_cache(cache, False)
        assert config.get_timing_cache() is cache
    return builder.build_serialized_network(network, config), config


def test_timing_cache_fills_survives_bytes_and_refuses_damage(tmp_path):
    model = conv_net(tmp_path / "m.onnx")
    config = kiln.Builder(kiln.Logger(kiln.Logger.ERROR)).create_builder_config()
    assert config.builder_optimization_level == 3  # the default
    cache = config.create_timing_cache(b"")
    assert len(cache) == 0
    build(model, 3, cache)
    entries = len(cache)
    assert entries > 0
    data = cache.serialize()
    assert data[:8] == b"KILNTCAC"
    again = config.create_timing_cache(data)
    assert len(again) == entries and again.entries_for_other_cpus == 0
    build(model, 3, again)
    assert len(again) == entries  # every layer answered by the cache: nothing new timed
    fresh = config.create_timing_cache(b"")
    assert fresh.combine(again, False) and len(fresh) == entries

    _, level0 = build(model, 0, config.create_timing_cache(b""))
    assert len(level0.get_timing_cache()) == 0  # level 0 times nothing

    damaged = bytearray(data)
    damaged[-1] ^= 0x01
    with pytest.raises(Exception, match="checksum mismatch"):
        config.create_timing_cache(bytes(damaged))
    with pytest.raises(Exception, match="not a kiln timing cache"):
        config.create_timing_cache(b"x" * 64)
