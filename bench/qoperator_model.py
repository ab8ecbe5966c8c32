"""A QOperator-format int8 model for comparing kiln's integer kernels with ONNX Runtime's.

QuantizeLinear -> QLinearConv chain (a first layer 3x3 stride 2 on 3 channels, 1x1, depthwise
3x3, 3x3 stride 2, 1x1 expansion: the convolution shapes of a MobileNet/ResNet stage) ->
DequantizeLinear -> Reshape + Transpose to one row per position -> QuantizeLinear -> two
QLinearMatMul (a transformer FFN's shapes, 256 -> 512 -> 256) -> DequantizeLinear.
u8 activations, s8 weights with per-channel scales (ONNX Runtime's default QOperator format),
int32 biases, random but seeded values. Run both engines on it with run_bench.py:

    .venv/bin/python bench/qoperator_model.py --out build/qoperator.onnx
    .venv/bin/python bench/run_bench.py --kiln build/kiln --models build/qoperator.onnx --threads 1,2
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def qparams(self, name, scale, zero_point):
        return (self.const(name + "_scale", np.array(scale, np.float32)),
                self.const(name + "_zp", np.array(zero_point, np.uint8)))

    def qconv(self, name, x, x_q, cin, cout, k, stride=1, group=1):
        """A QLinearConv with per-channel s8 weights; returns its output and quantization."""
        w = self.rng.integers(-127, 128, size=(cout, cin // group, k, k), dtype=np.int8)
        w_scale = (self.rng.uniform(0.5, 1.5, cout) / (np.sqrt(cin // group * k * k) * 127)).astype(np.float32)
        bias = self.rng.integers(-2000, 2000, size=cout, dtype=np.int32)
        y_q = self.qparams(name + "_y", 0.05, 128)
        inputs = [x, *x_q, self.const(name + "_w", w), self.const(name + "_w_scale", w_scale),
                  self.const(name + "_w_zp", np.zeros(cout, np.int8)), *y_q, self.const(name + "_b", bias)]
        self.nodes.append(helper.make_node("QLinearConv", inputs, [name], name=name, strides=[stride, stride],
                                           pads=[k // 2] * 4, group=group))
        return name, y_q

    def qmatmul(self, name, a, a_q, k, n):
        b = self.rng.integers(-127, 128, size=(k, n), dtype=np.int8)
        b_scale = (self.rng.uniform(1.5, 2.5, n) / (np.sqrt(k) * 127)).astype(np.float32)
        y_q = self.qparams(name + "_y", 0.05, 128)
        inputs = [a, *a_q, self.const(name + "_b", b), self.const(name + "_b_scale", b_scale),
                  self.const(name + "_b_zp", np.zeros(n, np.int8)), *y_q]
        self.nodes.append(helper.make_node("QLinearMatMul", inputs, [name], name=name))
        return name, y_q


def build(size, seed):
    b = Builder(seed)
    x_q = b.qparams("x", 4.0 / 255, 128)
    b.nodes.append(helper.make_node("QuantizeLinear", ["x", *x_q], ["xq"], name="quantize_x"))
    t, q = b.qconv("conv_first", "xq", x_q, 3, 32, 3, stride=2)
    t, q = b.qconv("conv_1x1_a", t, q, 32, 64, 1)
    t, q = b.qconv("conv_depthwise", t, q, 64, 64, 3, group=64)
    t, q = b.qconv("conv_3x3", t, q, 64, 64, 3, stride=2)
    t, q = b.qconv("conv_1x1_b", t, q, 64, 256, 1)
    b.nodes.append(helper.make_node("DequantizeLinear", [t, *q], ["features"], name="dequantize_features"))
    positions = (size // 4) * (size // 4)
    b.nodes.append(helper.make_node("Reshape", ["features", b.const("rows_shape", np.array([1, 256, positions], np.int64))],
                                    ["columns"], name="flatten"))
    b.nodes.append(helper.make_node("Transpose", ["columns"], ["rows"], name="to_rows", perm=[0, 2, 1]))
    r_q = b.qparams("rows_q", 0.05, 128)
    b.nodes.append(helper.make_node("QuantizeLinear", ["rows", *r_q], ["rowsq"], name="quantize_rows"))
    t, q = b.qmatmul("ffn_up", "rowsq", r_q, 256, 512)
    t, q = b.qmatmul("ffn_down", t, q, 512, 256)
    b.nodes.append(helper.make_node("DequantizeLinear", [t, *q], ["y"], name="dequantize_y"))
    graph = helper.make_graph(b.nodes, "qoperator_chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, positions, 256])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, default=112, help="input height and width (a multiple of 4)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    onnx.save(build(args.size, args.seed), args.out)
    print(args.out)


if __name__ == "__main__":
    main()
