"""Small models for the intermediate-output and `kiln compare` tests, built with onnx.helper."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(graph, path, opset=13):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tests")
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def resnet_style_model(path, channels=16):
    """A ResNet-style conv net on x [1, 3, 16, 16]: stem Conv + BatchNorm + Relu, one basic block
    (Conv-BN-Relu-Conv-BN + residual Add + Relu), a strided 1x1 Conv, MaxPool, GlobalAveragePool,
    Flatten, Gemm and Softmax: the folds and fusions kiln makes (BatchNorm into Conv, Conv +
    residual + activation, the NCHWc layout) all apply when nothing is marked."""
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def conv_bn(name, x, cin, cout, kernel, stride=1):
        pad = kernel // 2
        inits.append(_init(f"{name}.w", rng.standard_normal((cout, cin, kernel, kernel)) * (2.0 / (cin * kernel * kernel)) ** 0.5))
        inits.append(_init(f"{name}.b", rng.standard_normal(cout) * 0.1))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.conv"], name=f"{name}_conv",
                                      pads=[pad] * 4, strides=[stride, stride]))
        for p, values in (("scale", 1 + 0.1 * rng.standard_normal(cout)), ("bias", 0.1 * rng.standard_normal(cout)),
                          ("mean", 0.1 * rng.standard_normal(cout)), ("var", 1 + 0.1 * rng.random(cout))):
            inits.append(_init(f"{name}.{p}", values))
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + [f"{name}.{p}" for p in ("scale", "bias", "mean", "var")],
                                      [f"{name}.bn"], name=f"{name}_bn"))
        return f"{name}.bn"

    c = channels
    stem = conv_bn("stem", "x", 3, c, 3)
    nodes.append(helper.make_node("Relu", [stem], ["stem.relu"], name="stem_relu"))
    a = conv_bn("block.a", "stem.relu", c, c, 3)
    nodes.append(helper.make_node("Relu", [a], ["block.a.relu"], name="block_a_relu"))
    b = conv_bn("block.b", "block.a.relu", c, c, 3)
    nodes.append(helper.make_node("Add", [b, "stem.relu"], ["block.sum"], name="block_add"))
    nodes.append(helper.make_node("Relu", ["block.sum"], ["block.out"], name="block_relu"))
    down = conv_bn("down", "block.out", c, 2 * c, 1, stride=2)
    nodes.append(helper.make_node("Relu", [down], ["down.relu"], name="down_relu"))
    nodes.append(helper.make_node("MaxPool", ["down.relu"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["pool"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    inits.append(_init("fc.w", rng.standard_normal((10, 2 * c)) * 0.3))
    inits.append(_init("fc.b", rng.standard_normal(10) * 0.1))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
    graph = helper.make_graph(nodes, "resnet_style", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)
    return _save(graph, path)


def tanh_chain_model(path):
    """x [2, 8] -> MatMul (first) -> Tanh (act) -> MatMul (second) -> Relu -> y: the planted wrong
    Tanh kernel of libkiln_test_faults.so changes `act.out` first."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["first.out"], name="first"),
        helper.make_node("Tanh", ["first.out"], ["act.out"], name="act"),
        helper.make_node("MatMul", ["act.out", "w2"], ["second.out"], name="second"),
        helper.make_node("Relu", ["second.out"], ["y"], name="last"),
    ]
    graph = helper.make_graph(nodes, "tanh_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                              [_init("w1", rng.standard_normal((8, 8)) * 0.5), _init("w2", rng.standard_normal((8, 4)))])
    return _save(graph, path)


def bf16_sensitive_model(path):
    """x [4, 32] holds 1000 + u (u in [0, 1)): `sensitive` = MatMul(x, W) - 1000 * colsum(W) keeps
    only u's part, which BF16 (8 significant bits: steps of 4 near 1000) rounds away, while
    `tolerant` = MatMul(s, V) on values near 1 loses ~0.4 % in BF16. Only `sensitive` must stay
    FP32 for y to pass a 2 % tolerance."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((32, 16)).astype(np.float32) * 0.3
    v = rng.standard_normal((16, 8)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["sensitive.out"], name="sensitive"),
        helper.make_node("Add", ["sensitive.out", "offset"], ["s"], name="remove_offset"),
        helper.make_node("MatMul", ["s", "v"], ["y"], name="tolerant"),
    ]
    graph = helper.make_graph(nodes, "bf16_sensitive", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              [_init("w", w), _init("v", v), _init("offset", -1000.0 * w.sum(axis=0))])
    return _save(graph, path)


def bf16_sensitive_input(seed=0):
    return (1000.0 + np.random.default_rng(seed).random((4, 32))).astype(np.float32)
