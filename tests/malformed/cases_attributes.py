"""Attributes that make no sense: Conv and pooling geometry, attributes of the wrong type, required
attributes left out, and the crashes issue 22 found (Split on a scalar, Slice's `starts` as "")."""
import numpy as np
from onnx import helper

from case import Case
from model_builders import FLOAT, INT64, const, info, one_node, save


def on_node(command, op, inputs, **attrs):
    def make(d):
        path = save(d, one_node(op, inputs, **attrs))
        return [command, path] + (["-o", d / "model.kiln"] if command == "build" else [])
    return make


def inspect(op, inputs, **attrs):
    return on_node("inspect", op, inputs, **attrs)


def conv(x_shape=(1, 2, 5, 5), w_shape=(2, 2, 3, 3), command="inspect", **attrs):
    w = const("w", np.zeros(w_shape, np.float32), np.float32)
    return on_node(command, "Conv", [info("x", FLOAT, list(x_shape)), w], **attrs)


def pool(op="MaxPool", x_shape=(1, 1, 5, 5), **attrs):
    return inspect(op, [info("x", FLOAT, list(x_shape))], **attrs)


def wrong_type(op, inputs, name, value, command="inspect"):
    """A node whose attribute `name` holds `value`, of a type its schema does not allow."""
    def make(d):
        m = one_node(op, inputs)
        m.graph.node[0].attribute.append(helper.make_attribute(name, value))
        return [command, save(d, m)]
    return make


def nchwc(op, inputs, **attrs):
    """`kiln inspect` on one node of onnxruntime's blocked layout (domain com.microsoft.nchwc)."""
    def make(d):
        m = one_node(op, inputs, **attrs)
        m.graph.node[0].domain = "com.microsoft.nchwc"
        m.opset_import.append(helper.make_opsetid("com.microsoft.nchwc", 1))
        return ["inspect", save(d, m)]
    return make


def node_with_blank_input(d):
    m = one_node("Slice", [info("x", FLOAT, [3])])
    m.graph.node[0].input.extend(["", "e"])
    m.graph.initializer.append(const("e", [2]))
    return ["inspect", save(d, m)]


X = info("x", FLOAT, [2, 3])
NODE = "node 'n'"
CASES = [
    Case("conv-stride-zero", conv(strides=[0, 0]), 1, [NODE, "stride"]),
    Case("conv-stride-negative", conv(strides=[-1, 1]), 1, [NODE, "stride"]),
    Case("conv-dilation-zero", conv(dilations=[0, 1]), 1, [NODE, "dilation"]),
    Case("conv-pads-negative", conv(pads=[-1, 0, 0, 0]), 1, [NODE, "pad"]),
    Case("conv-pads-1e9-build", conv(pads=[10**9] * 4, command="build"), 1,
         [NODE + " (Conv): output", "over the default allocation limit of"]),
    Case("conv-kernel-larger-than-input", conv(w_shape=(2, 2, 7, 7)), 1, [NODE]),
    Case("conv-group-not-dividing-channels", conv(x_shape=(1, 3, 5, 5), w_shape=(2, 1, 3, 3), group=2), 1,
         [NODE, "input has 3 channels but weight expects 2"]),
    Case("conv-group-zero", conv(group=0), 1, [NODE, "group"]),
    Case("conv-weight-channels-mismatch", conv(w_shape=(2, 5, 3, 3)), 1, [NODE]),
    Case("conv-weight-rank-wrong", conv(w_shape=(2, 2, 3)), 1, [NODE]),
    Case("conv-strides-too-many", conv(strides=[1, 1, 1]), 1, [NODE, "strides"]),
    Case("maxpool-kernel-missing", pool(), 1, [NODE, "kernel_shape"]),
    Case("maxpool-kernel-zero", pool(kernel_shape=[0, 0]), 1, [NODE, "kernel"]),
    Case("maxpool-stride-zero", pool(kernel_shape=[2, 2], strides=[0, 0]), 1, [NODE, "stride"]),
    Case("maxpool-kernel-larger-than-input", pool(kernel_shape=[9, 9]), 1, [NODE]),
    Case("maxpool-pads-negative", pool(kernel_shape=[2, 2], pads=[-1, -1, 0, 0]), 1, [NODE, "pad"]),
    Case("averagepool-kernel-larger-than-input", pool("AveragePool", kernel_shape=[6, 6]), 1, [NODE]),
    Case("averagepool-dilation-zero", pool("AveragePool", kernel_shape=[2, 2], dilations=[0, 0]), 1, [NODE]),
    Case("transpose-perm-float", wrong_type("Transpose", [X], "perm", [1.0, 0.0]), 1, [NODE, "perm"]),
    Case("transpose-perm-duplicate", inspect("Transpose", [X], perm=[0, 0]), 1, [NODE, "perm"]),
    Case("gemm-alpha-string", wrong_type("Gemm", [X, info("b", FLOAT, [3, 2])], "alpha", "big", "run"), 1,
         [NODE, "attribute 'alpha' should be of type float, got string"]),
    Case("softmax-axis-out-of-range", inspect("Softmax", [X], axis=7), 1, [NODE, "7"]),
    Case("concat-axis-missing", inspect("Concat", [X, info("z", FLOAT, [2, 3])]), 1, [NODE, "axis"]),
    Case("concat-axis-out-of-range", inspect("Concat", [X, info("z", FLOAT, [2, 3])], axis=5), 1, [NODE, "5"]),
    Case("cast-to-missing", inspect("Cast", [X]), 1, [NODE, "to"]),
    Case("cast-to-12345", inspect("Cast", [X], to=12345), 3, [NODE, "cannot cast to element type 12345"]),
    Case("split-rank-0", inspect("Split", [info("x", FLOAT, [])], num_outputs=1, opset=18), 1, [NODE]),
    Case("slice-starts-blank", node_with_blank_input, 1, [NODE, "input 1 is required by Slice-13"]),
    Case("slice-step-zero-constant", inspect("Slice", [info("x", FLOAT, [3]), const("s", [0]), const("e", [3]),
                                                      const("a", [0]), const("p", [0])]), 1, [NODE, "step"]),
    Case("unknown-attribute-type-int-for-ints", wrong_type("Transpose", [X], "perm", 1), 1, [NODE, "perm"]),
    Case("nchwc-conv-weight-rows-not-blocked",
         nchwc("Conv", [info("x", FLOAT, [1, 16, 4, 4]), const("w", np.zeros((20, 16, 3, 3)), np.float32)]), 1,
         [NODE, "input 1 (W)", "not a multiple of the NCHWc block size"]),
    Case("nchwc-reorder-output-channels-past-padding",
         nchwc("ReorderOutput", [info("x", FLOAT, [1, 32, 2, 2])], channels=40), 1,
         [NODE, "'channels' 40 does not fit input 0 (X)"]),
    Case("nchwc-maxpool-rank-5", nchwc("MaxPool", [info("x", FLOAT, [1, 16, 4, 4, 1])], kernel_shape=[2, 2]), 1,
         [NODE, "input 0 (X) must be 4-D"]),
]
