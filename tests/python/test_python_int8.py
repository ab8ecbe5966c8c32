"""INT8 calibrators subclassed in Python (docs/precision.md), as TensorRT's Python samples write them:
config.int8_calibrator with BuilderFlag.INT8, batches as numpy arrays or host pointers, the cache
read and written through the calibrator, and bad batches refused by name."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

RNG = np.random.default_rng(3)
SHAPE = (1, 3, 8, 8)


def conv_net(path):
    """x -> Conv(8, 3x3, pad 1) -> Relu -> Conv(4, 1x1) -> y."""
    w1 = numpy_helper.from_array((RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((RNG.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


class Batches(kiln.IInt8EntropyCalibrator2):
    def __init__(self, batches, cache=None, pointers=False):
        kiln.IInt8EntropyCalibrator2.__init__(self)
        self.batches, self.cache, self.written, self.pointers, self.names = list(batches), cache, None, pointers, []

    def get_batch_size(self):
        return 1

    def get_batch(self, names):
        self.names.append(list(names))
        if not self.batches:
            return None
        x = np.ascontiguousarray(self.batches.pop(0))
        if self.pointers:
            self.kept = x
            return [x.ctypes.data]
        return [x]

    def read_calibration_cache(self):
        return self.cache

    def write_calibration_cache(self, cache):
        self.written = bytes(cache)


def build(model, calibrator):
    logger = kiln.Logger(kiln.Logger.ERROR)
    builder = kiln.Builder(logger)
    network = builder.create_network()
    assert kiln.OnnxParser(network, logger).parse_from_file(str(model))
    config = builder.create_builder_config()
    if calibrator is not None:
        config.set_flag(kiln.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
        assert config.int8_calibrator is calibrator
    engine = kiln.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    return engine.create_execution_context()


def inputs(count, seed):
    return list(np.random.default_rng(seed).standard_normal((count, *SHAPE)).astype(np.float32))


def snr_db(reference, test):
    return 10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / np.sum((reference - test).astype(np.float64) ** 2))


@pytest.mark.parametrize("pointers", [False, True])
def test_a_python_calibrator_quantizes_the_network(tmp_path, pointers):
    model = conv_net(tmp_path / "net.onnx")
    calibrator = Batches(inputs(8, 1), pointers=pointers)
    int8 = build(model, calibrator)
    fp32 = build(model, None)
    assert calibrator.names[0] == ["x"]
    assert calibrator.written.startswith(b"kiln-int8-calibration calibrator=entropy ")
    held_out = np.stack(inputs(4, 2))
    a = np.stack([int8.infer({"x": x})["y"] for x in held_out])
    b = np.stack([fp32.infer({"x": x})["y"] for x in held_out])
    assert not np.array_equal(a, b)  # quantized
    assert snr_db(b, a) >= 25
    # Its cache alone builds the same engine; no batch is asked for.
    cached = Batches([], cache=calibrator.written)
    again = build(model, cached)
    assert cached.names == []
    np.testing.assert_array_equal(np.stack([again.infer({"x": x})["y"] for x in held_out]), a)


def test_bad_batches_are_refused_naming_the_input(tmp_path):
    model = conv_net(tmp_path / "net.onnx")
    with pytest.raises(Exception, match="the calibrator returned no batches"):
        build(model, Batches([]))
    with pytest.raises(Exception, match=r"input 'x': shape 1x3x8x4 does not match the network's 1x3x8x8"):
        build(model, Batches([np.zeros((1, 3, 8, 4), np.float32)]))
    nan = np.zeros(SHAPE, np.float32)
    nan[0, 1, 2, 3] = np.nan
    with pytest.raises(Exception, match=r"calibration batch 0, input 'x': holds NaN at element 83"):
        build(model, Batches([nan]))
    with pytest.raises(TypeError, match="int8_calibrator must be a kiln.IInt8Calibrator"):
        kiln.Builder(kiln.Logger()).create_builder_config().int8_calibrator = object()
