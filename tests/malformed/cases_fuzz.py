"""What the fuzz targets (tests/fuzz, docs/reliability.md "Fuzzing") found, each reduced to a small
case: nodes with no outputs, int64 overflow in Pad, pooling, Flatten and Concat shapes, float
depths with no int64 value, element types past the last ONNX type, malformed .npy string dtypes."""
import numpy as np
import onnx
from onnx import helper

from case import Case
from model_builders import FLOAT, INT64, INT64_MAX, INT64_MIN, const, feeds, graph, info, model, one_node, save
from cases_plans_inputs import header, npy, relu_with_input


def with_idle_node(op, inputs=(), initializers=(), opset=17, **attrs):
    """Relu(x) -> y beside a node 'n' of `op` on x (and `inputs`) that has no outputs at all."""
    def make(d):
        g = graph([helper.make_node(op, ["x", *inputs], [], name="n", **attrs), helper.make_node("Relu", ["x"], ["y"], name="r")],
                  [info("x", FLOAT, [1, 2, 2])], [info("y")], list(initializers))
        return ["build", save(d, model(g, opset=opset)), "-o", d / "model.kiln"]
    return make


def inspect(op, inputs, opset=17, outputs=None, **attrs):
    def make(d):
        return ["inspect", save(d, one_node(op, inputs, outputs=outputs, opset=opset, **attrs))]
    return make


def run(op, inputs, opset=17, **attrs):
    def make(d):
        return ["run", save(d, one_node(op, inputs, opset=opset, **attrs))]
    return make


def pads(values):
    return [info("x", FLOAT, [3]), const("p", values)]


def pool(**attrs):
    return inspect("MaxPool", [info("x", FLOAT, [1, 1, 5])], **attrs)


def elem_type(where, code):
    def make(d):
        m = one_node("Relu", [info("x", code if where == "input" else FLOAT, [2])],
                     outputs=[info("y", code if where == "output" else FLOAT, [2])])
        return ["build", save(d, m), "-o", d / "model.kiln"]
    return make


def roi_align(rois):
    """RoiAlign over a 1x1x4x4 input x with the given boxes (float32 [n, 4]) of image 0."""
    return run("RoiAlign", [info("x", FLOAT, [1, 1, 4, 4]), const("rois", rois, np.float32),
                            const("bi", [0] * len(rois))], opset=16, output_height=2, output_width=2)


BN_PARAMS = [const(n, [1, 1], np.float32) for n in ("s", "b", "m", "v")]
NODE = "node 'n'"
CASES = [
    Case("split-no-outputs-num-outputs-0", with_idle_node("Split", opset=18, num_outputs=0), 1,
         ["node 'n' (Split) has no outputs"]),
    Case("split-no-outputs", with_idle_node("Split"), 1, ["node 'n' (Split) has no outputs"]),
    Case("batchnorm-no-outputs", with_idle_node("BatchNormalization", ["s", "b", "m", "v"], BN_PARAMS), 1,
         ["node 'n' (BatchNormalization) has no outputs"]),
    Case("split-sizes-overflow", inspect("Split", [info("x", FLOAT, [3]), const("s", [INT64_MAX, INT64_MAX])],
                                         outputs=[info("a"), info("b")]), 1, [NODE, "split sizes add up to more than int64 holds"]),
    Case("pad-int64-min-pads", inspect("Pad", pads([INT64_MIN, -1])), 1, [NODE, "add up past int64"]),
    Case("pad-int64-max-pads", inspect("Pad", pads([INT64_MAX, 1])), 1, [NODE, "add up past int64"]),
    Case("pad-past-int64-axis", inspect("Pad", pads([INT64_MAX - 1, 0])), 1, [NODE, "longer than int64 holds"]),
    Case("maxpool-window-past-int64", pool(kernel_shape=[INT64_MAX], dilations=[2]), 1,
         [NODE, "pooling window of more than 2^63 does not fit input size 5"]),
    Case("maxpool-pads-past-int64", pool(kernel_shape=[1], pads=[INT64_MAX, INT64_MAX]), 1,
         [NODE, "pooling output size past int64"]),
    Case("maxpool-same-upper-stride-int64-max", pool(kernel_shape=[2], strides=[INT64_MAX], auto_pad="SAME_UPPER"), 0,
         ["y  float32[1x1x1]"]),
    Case("onehot-depth-nan", run("OneHot", [const("i", [0, 1]), const("depth", [np.nan], np.float32),
                                            const("v", [0, 1], np.float32)]), 1, [NODE, "depth 0 must be positive"]),
    Case("onehot-depth-1e30", run("OneHot", [const("i", [0, 1]), const("depth", [1e30], np.float32),
                                             const("v", [0, 1], np.float32)]), 1, [NODE, "output 0", "9223372036854775807"]),
    Case("flatten-count-past-int64", inspect("Flatten", [info("x", FLOAT, [1 << 32, 1 << 32, 2])], axis=2), 1,
         [NODE, "has more elements than int64 holds"]),
    Case("concat-axis-past-int64", inspect("Concat", [info("a", FLOAT, [INT64_MAX]), info("b", FLOAT, [INT64_MAX])], axis=0),
         1, [NODE, "inputs along axis 0 add up past int64"]),
    Case("reshape-to-empty-shape", run("Reshape", [info("x", FLOAT, [1]), const("s", np.zeros(0, np.int64))]), 0, ["y  float32[scalar]"]),
    Case("elem-type-65-input", elem_type("input", 65), 1, ["graph input 'x' has elem_type 65, which is not an ONNX data type kiln knows"]),
    Case("elem-type-65-output", elem_type("output", 65), 1, ["graph output 'y' has elem_type 65"]),
    Case("npy-unicode-count-not-a-number", relu_with_input(npy(header("(2, 3)", descr="<Uxy"))), 1,
         ["x.npy: malformed .npy string dtype '<Uxy'"]),
    Case("npy-unicode-count-zero", relu_with_input(npy(header("(508888887,)", descr="<U0"))), 1,
         ["x.npy: malformed .npy string dtype '<U0' (a string of 0 characters)"]),
    Case("npy-unicode-count-huge", relu_with_input(npy(header("(0,)", descr="<U99999999999"))), 1,
         ["x.npy: malformed .npy string dtype '<U99999999999'"]),
]


def npz_claiming(size):
    """An .npz of one deflated entry whose headers claim `size` bytes inflated."""
    def write(d):
        import io
        import struct
        import zipfile
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("x.npy", b"\0" * 100)
        data = bytearray(buf.getvalue())
        for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
            at = data.find(signature)
            data[at + offset:at + offset + 4] = struct.pack("<I", size)
        (d / "x.npz").write_bytes(bytes(data))
        return d / "x.npz"
    return write


def calibrated_with(write):
    """kiln build --int8 of a Relu model with the calibration data file `write(d)` returns."""
    def make(d):
        m = one_node("Relu", [info("x", FLOAT, [2, 3])])
        return ["build", save(d, m), "-o", d / "model.kiln", "--int8", "--calibration-data", write(d)]
    return make


CASES += [
    Case("npz-entry-claims-2-gib", calibrated_with(npz_claiming(1 << 31)), 1,
         ["x.npz: entry 'x.npy': claims 2147483648 bytes inflated from", "more than deflate can produce"]),
]


def softmax_of(values):
    def make(d):
        m = one_node("Softmax", [info("x", FLOAT, [len(values)])])
        return ["run", save(d, m), *feeds(d, x=np.array(values, np.float32))]
    return make


CASES += [
    # A NaN input reached a float -> int conversion in the scalar exp (undefined behaviour, UBSan's
    # finding in session_run); NaN in, NaN out, as in ONNX Runtime.
    Case("softmax-nan-input", softmax_of([np.nan, 1, 2]), 0, ["y  float32[3]", "nan"]),
]


def float_range(start, limit, delta):
    def make(d):
        m = one_node("Range", [info(n, FLOAT, []) for n in ("start", "limit", "delta")])
        scalars = {"start": start, "limit": limit, "delta": delta}
        return ["run", save(d, m), *feeds(d, **{n: np.array(v, np.float32) for n, v in scalars.items()})]
    return make


CASES += [
    # A count far below int64's range was converted to int64 (undefined behaviour, session_run);
    # a range that goes the wrong way is empty.
    Case("range-float-count-below-int64", float_range(0, -7e37, 1e-7), 0, ["y  float32[0]"]),
]


# The first 2-hour campaigns (session 17).
def lstm_hidden(hidden):
    return inspect("LSTM", [info("x", FLOAT, [2, 1, 3]), info("w", FLOAT, [1, 8, 3]), info("r", FLOAT, [1, 8, 2])],
                   outputs=[info("y")], hidden_size=hidden)


def window(op, size):
    def make(d):
        m = one_node(op, [info("size", INT64, [])])
        return ["run", save(d, m), *feeds(d, size=np.array(size, np.int64))]
    return make


CASES += [
    # 4 x hidden_size overflowed int64 in shape inference (UBSan, onnx_structured).
    Case("lstm-hidden-size-past-int64", lstm_hidden(INT64_MAX // 3), 1,
         [NODE, "hidden_size 3074457345618258602 is too large (4 gates of it overflow int64)"]),
    # The window was computed in a std::vector<double> of `size` before the output was allocated:
    # a size from run-time data went past the allocation limit unchecked (session_run, out of memory).
    Case("blackmanwindow-1e12", window("BlackmanWindow", 10**12), 1,
         [NODE, "output 0 'y': tensor float32[1000000000000] needs"]),
    Case("hannwindow-1e12", window("HannWindow", 10**12), 1, [NODE, "output 0 'y': tensor float32[1000000000000] needs"]),
]

CASES += [
    # ConvTranspose's output size stride * (in - 1) + dilation * (kernel - 1) + 1 overflowed int64
    # for a weight of spatial size 2^63 - 2 (UBSan, onnx_structured campaign); Conv's extent too.
    Case("convtranspose-kernel-past-int64",
         inspect("ConvTranspose", [info("x", FLOAT, [1, 1, 3]), info("w", FLOAT, [1, 2, INT64_MAX - 1])]), 1,
         [NODE, "the output size of spatial axis 0 is past int64"]),
    Case("convtranspose-stride-past-int64",
         inspect("ConvTranspose", [info("x", FLOAT, [1, 1, 3]), info("w", FLOAT, [1, 1, 2])], strides=[INT64_MAX]), 1,
         [NODE, "the output size of spatial axis 0 is past int64"]),
    Case("conv-dilation-past-int64",
         inspect("Conv", [info("x", FLOAT, [1, 1, 5]), info("w", FLOAT, [1, 1, 3])], dilations=[INT64_MAX]), 1,
         [NODE, "kernel extent exceeds the padded input"]),
    Case("conv-same-upper-stride-int64-max",
         inspect("Conv", [info("x", FLOAT, [1, 1, 5]), info("w", FLOAT, [1, 1, 3])], strides=[INT64_MAX],
                 auto_pad="SAME_UPPER"), 0, ["y  float32[1x1x1]"]),
]

CASES += [
    # Slice's shape rule made a vector of as many axes as starts' declared length, 2^31 (16 GiB;
    # libFuzzer's malloc limit, onnx_structured campaign).
    Case("slice-starts-longer-than-rank",
         inspect("Slice", [info("x", FLOAT, [2, 3]), info("starts", INT64, [2**31]), info("ends", INT64, [2**31])]), 1,
         [NODE, "input 1 (starts) has 2147483648 elements, more than the 2 axes of input 0"]),
]


def matmul_nbits(k):
    """com.microsoft MatMulNBits with attribute K = k over a small B."""
    def make(d):
        node = helper.make_node("MatMulNBits", ["a", "b", "scales"], ["y"], name="n", domain="com.microsoft",
                                K=k, N=12, bits=4, block_size=16)
        g = graph([node], [info("a", FLOAT, [2, 8]), info("b", 2, [12, 2, 4]), info("scales", FLOAT, [24])],
                  [info("y")])
        m = model(g)
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return ["inspect", save(d, m)]
    return make


CASES += [
    # ceil(K / block_size) was computed as (K + block_size - 1) / block_size, which overflowed int64
    # for K near its limit (UBSan, onnx_structured on session 21's contrib seeds).
    Case("matmulnbits-k-past-int64", matmul_nbits(INT64_MAX - 1), 1,
         [NODE, "must be [N, blocks, block_size * bits / 8] = [12, 576460752303423488, 8]"]),
]


def ms_attention(heads):
    """com.microsoft Attention with num_heads = heads over a [1, 2, 4] input and [4, 12] weights."""
    def make(d):
        node = helper.make_node("Attention", ["x", "w"], ["y"], name="n", domain="com.microsoft", num_heads=heads)
        g = graph([node], [info("x", FLOAT, [1, 2, 4]), info("w", FLOAT, [4, 12])], [info("y")])
        m = model(g)
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return ["inspect", save(d, m)]
    return make


CASES += [
    # The weights' width was checked against 3 * num_heads, which overflowed int64 for num_heads
    # near a third of its limit (UBSan, onnx_structured on session 21's contrib seeds, QAttention).
    Case("ms-attention-num-heads-past-int64", ms_attention(INT64_MAX // 2), 1,
         [NODE, "the width must be 3 * hidden with hidden a multiple of num_heads 4611686018427387903"]),
]


CASES += [
    # The weight's input channels times group overflowed int64 in Conv's shape rule (UBSan,
    # onnx_structured on session 21's seeds).
    Case("conv-weight-channels-times-group-past-int64",
         inspect("Conv", [info("x", FLOAT, [1, 4, 5, 5]), info("w", FLOAT, [2, INT64_MAX - 1, 3, 3])], group=2), 1,
         [NODE, "the weight's input channels x group would be 9223372036854775806 x 2, past int64"]),
]


CASES += [
    # MaxUnpool's (in - 1) * stride + kernel - pads overflowed int64 for an input dim near its
    # limit (UBSan, onnx_structured on session 21's seeds).
    Case("maxunpool-size-past-int64",
         inspect("MaxUnpool", [info("x", FLOAT, [1, 1, INT64_MAX - 1]), info("i", INT64, [1, 1, INT64_MAX - 1])],
                 kernel_shape=[2], strides=[2]), 1,
         [NODE, "the unpooled size of spatial axis 0 is past int64"]),
    # QuantizeLinear's per-axis layout multiplied x's dims before and after the axis unchecked
    # (2147483648 x 4294967296; UBSan, onnx_structured on session 21's seeds).
    Case("quantizelinear-outer-size-past-int64",
         inspect("QuantizeLinear", [info("x", FLOAT, [2147483648, 4294967296, 3]), info("s", FLOAT, [3])],
                 opset=13, axis=2), 1,
         [NODE, "x's size before the axis"]),
]


def col2im(x_shape, image, block, **attrs):
    return run("Col2Im", [info("x", FLOAT, x_shape), const("i", image), const("b", block)], opset=18, **attrs)


CASES += [
    # With no (batch, channel) pair Col2Im's kernel still built its offset table, sized by the image
    # and the blocks alone: 2^40 entries, std::bad_alloc (found reading the kernel after finding 19).
    Case("col2im-empty-input-huge-image", col2im([1, 0, 1], [2**20, 2**20], [2**20, 2**20]), 0, ["y"]),
    # The block count (image + pads - dilation x (block - 1) - 1) / stride + 1 overflowed int64.
    Case("col2im-block-count-past-int64", col2im([1, 1, 4], [2**62], [1], pads=[2**62, 2**62]), 1,
         [NODE, "the number of sliding blocks is past int64 on axis 0"]),
    Case("col2im-image-shape-negative", col2im([1, 1, 4], [-5], [1]), 1,
         [NODE, "image_shape and block_shape must be positive, got -5 and 1 on axis 0"]),
]


H = 2**20
CASES += [
    # An empty input with a long axis: kernels sized scratch by the axis or looped over the empty
    # rows (found by running every op family on such inputs after finding 19).
    Case("topk-empty-input-long-axis", run("TopK", [info("x", FLOAT, [0, H * H]), const("k", [1])], axis=1), 0, ["y"]),
    Case("dft-empty-input-long-axis", run("DFT", [info("x", FLOAT, [0, H * H, 1])], opset=20), 0, ["y"]),
    Case("instancenorm-2-40-empty-channels",
         run("InstanceNormalization", [info("x", FLOAT, [H * H, 1, 0]), const("s", [1.0], np.float32),
                                       const("b", [0.0], np.float32)]), 0, ["y"]),
    Case("layernorm-empty-input-long-row",
         run("LayerNormalization", [info("x", FLOAT, [0, H * H]), const("s", [1.0], np.float32)]), 0, ["y"]),
    Case("convtranspose-no-batch-huge-image",
         run("ConvTranspose", [info("x", FLOAT, [0, 1, H, H]), const("w", np.ones((1, 1, 3, 3)), np.float32)]), 0,
         ["y"]),
]


def contrib_node(op, inputs, outputs, command, **attrs):
    """One com.microsoft `op` node 'n' of value-info inputs, for `kiln inspect` or `kiln run`."""
    def make(d):
        node = helper.make_node(op, [i.name for i in inputs], [o.name for o in outputs], name="n",
                                domain="com.microsoft", **attrs)
        m = model(graph([node], list(inputs), list(outputs)))
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return [command, save(d, m)]
    return make


LA_OUTPUTS = [info("output"), info("present_state")]
GDN_OUTPUTS = [info("output"), info("final_state")]
CASES += [
    # 2^39 query heads x dv 2^30 is past int64, though the inputs hold nothing.
    Case("ms-linear-attention-output-width-past-int64",
         contrib_node("LinearAttention", [info("q", FLOAT, [0, 2, 2**40]), info("k", FLOAT, [0, 2, 2]),
                                          info("v", FLOAT, [0, 2, 2**30])], LA_OUTPUTS, "inspect",
                      q_num_heads=2**39, kv_num_heads=1, update_rule="linear"), 1,
         [NODE, "output dim 2 would be", "past int64"]),
    # An empty [B, S, H, D] input declares its batch: GatedDeltaNet's request bounds are sized by it.
    Case("gated-delta-net-empty-input-huge-batch",
         contrib_node("GatedDeltaNet", [info("q", FLOAT, [2**40, 0, 2, 4]), info("k", FLOAT, [2**40, 0, 2, 4]),
                                        info("v", FLOAT, [2**40, 0, 2, 3])], GDN_OUTPUTS, "run",
                      update_rule="linear"), 1,
         [NODE, "request bounds", "allocation limit"]),
    # kv_num_heads 2^40 with no value column: the head loop ran 2^40 times over nothing.
    Case("ms-linear-attention-huge-kv-heads-no-values",
         contrib_node("LinearAttention", [info("q", FLOAT, [1, 2, 4]), info("k", FLOAT, [1, 2, 4]),
                                          info("v", FLOAT, [1, 2, 0])], LA_OUTPUTS, "run",
                      q_num_heads=1, kv_num_heads=2**40, update_rule="linear"), 0, ["output"]),
]


def ms_node(op, inputs, **attrs):
    """One com.microsoft `op` node 'n' over `inputs` (None for an omitted one), inspected."""
    def make(d):
        names = [i.name if i else "" for i in inputs]
        node = helper.make_node(op, names, ["y"], name="n", domain="com.microsoft", **attrs)
        m = model(graph([node], [i for i in inputs if i], [info("y")]))
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return ["inspect", save(d, m)]
    return make


CASES += [
    # DynamicQuantizeLSTM's rule computed 4 * hidden_size unchecked (UBSan, the onnx_structured
    # campaign of session 22 after 701,798 executions; the input is a seed). The same product in
    # ten other rules (output widths head size x num_heads, 3 * num_heads, upsampled sizes, ...)
    # is checked since.
    Case("dynamicquantizelstm-gates-past-int64",
         ms_node("DynamicQuantizeLSTM", [info("x", FLOAT, [2, 1, 3]), info("w", 3, [1, 3, 8]), info("r", 3, [1, 2, 8]),
                                         None, None, None, None, None, info("ws", FLOAT, [1]), info("wz", 3, [1]), info("rs", FLOAT, [1]),
                                         info("rz", 3, [1])],
                 hidden_size=INT64_MAX), 1,
         [NODE, "4 * hidden_size would be 9223372036854775807 x 4, past int64"]),
]


CASES += [
    # HyperConnectionPreMix's gate rule offset a scalar gate's empty dims past the streams' leading
    # dims (UBSan: an offset applied to a null pointer; the campaign of session 22 on the newer
    # LLM seeds, 699,908 executions; the input is a seed).
    Case("hyperconnection-scalar-gate",
         ms_node("HyperConnectionPreMix", [info("streams", FLOAT, [2, 4, 8]), info("pre_mix", FLOAT, [])]), 1,
         [NODE, "pre_mix scalar must have the streams' leading dimensions, then (C), (C, 1), (C, H) with C = 4, H = 8"]),
]


def ms_grid_sample(grid, padding_mode):
    """com.microsoft GridSample 'n', bicubic, of a random x [1, 1, 3, 3] at a constant grid, run."""
    def make(d):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="n", domain="com.microsoft",
                                mode="bicubic", padding_mode=padding_mode)
        m = model(graph([node], [info("x", FLOAT, [1, 1, 3, 3])], [info("y")],
                        [const("grid", np.array(grid, np.float32).reshape(1, 1, -1, 2), np.float32)]))
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return ["run", save(d, m)]
    return make


CASES += [
    # com.microsoft GridSample pads a bicubic coordinate's taps, not the coordinate, so a coordinate
    # of 1e30 reached the float -> int64 conversion of its floor (UBSan; the session_run campaign of
    # session 23 after 126,688 executions; the input is a seed). Taps are now indexed in double.
    Case("ms-gridsample-bicubic-border-huge-coordinate", ms_grid_sample([1e30, 0.0, -1e30, 3e38], "border"), 0, ["y"]),
    Case("ms-gridsample-bicubic-reflection-huge-coordinate",
         ms_grid_sample([1e30, 0.5, -7e20, 2e19], "reflection"), 0, ["y"]),
]


def bool_bytes_where(raw):
    """Where(c, a, b) with c a bool initializer whose raw_data holds the bytes `raw`."""
    def make(d):
        c = onnx.TensorProto(name="c", data_type=onnx.TensorProto.BOOL, dims=[len(raw)], raw_data=bytes(raw))
        g = graph([helper.make_node("Where", ["c", "a", "b"], ["y"], name="w")],
                  [info("a", FLOAT, [len(raw)]), info("b", FLOAT, [len(raw)])], [info("y")], [c])
        return ["run", save(d, model(g))]
    return make


def bool_npy_not(data):
    """Not(x) with x fed from a .npy of dtype |b1 holding the bytes `data`."""
    def make(d):
        g = graph([helper.make_node("Not", ["x"], ["y"], name="not")], [info("x", onnx.TensorProto.BOOL, [len(data)])],
                  [info("y")])
        return ["run", save(d, model(g)), "--input", f"x={npy(header((len(data),), '|b1'), bytes(data))(d)}"]
    return make


CASES += [
    # A bool tensor's raw bytes other than 0 and 1 were read as a C++ bool (UBSan: "load of value 43,
    # which is not a valid value for type 'const bool'", in Pad's shape rule reading a bool pads
    # input; the onnx_structured campaign of session 24 after 1,433,546 executions, 871 s; the input
    # is a seed). Bool raw_data, external data, .npy and plan bytes are now read as byte != 0.
    Case("bool-raw-data-byte-43", bool_bytes_where([43, 0, 255, 1]), 0, ["y"]),
    Case("bool-npy-byte-43", bool_npy_not([43, 0, 2]), 0, ["y"]),
    # RoiAlign with a NaN box coordinate passed every range test and cast NaN to int64 (UBSan; the
    # session_run campaign of session 25, 13,670 executions); an infinite or huge box asked for an
    # unbounded sampling grid.
    Case("roialign-roi-nan", roi_align([[0, 0, np.nan, 2]]), 1,
         [NODE, "rois row 0 has a non-finite coordinate (nan)"]),
    Case("roialign-roi-1e30", roi_align([[0, 0, 1e30, 2]]), 1,
         [NODE, "rois row 0", "samples per bin on that axis"]),
]
