"""The com.microsoft ops of recent LLM architectures that onnxruntime 1.32 runs on CPU (ScaledSiLU,
GatedAdd, GatedRMSNorm, BranchwiseRMSNorm, UnfoldTensor, ...): each case builds one node with
onnx.helper, runs it in onnxruntime and in kiln on the same random inputs (fixed seed) and compares:
exact for integer outputs, 1e-5 relative for float32, and within a rounding step of the type for
float16 and bfloat16. A bfloat16 tensor enters and leaves the graph through a Cast from and to
float32 (onnxruntime's Python API has no bfloat16 arrays), with float32 values that bfloat16
holds exactly. Each op also has a bad input, checked by kiln's message."""
import ml_dtypes
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import kiln
from test_contrib_ops import save_fuzz_seed

MS = "com.microsoft"
F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
NP_OF = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.INT32: np.int32,
         TensorProto.INT64: np.int64, TensorProto.DOUBLE: np.float64, TensorProto.UINT8: np.uint8,
         TensorProto.INT8: np.int8, TensorProto.BOOL: np.bool_}
KILN_ERRORS = (kiln.Fail, kiln.InvalidArgument, kiln.InvalidGraph, kiln.NotImplemented, kiln.RuntimeException)
TOLERANCE = {F32: 1e-5, F16: 2e-3, BF16: 1.6e-2}


def value(r, shape, elem=F32, scale=1.0):
    """Random normal values of shape, representable in elem, as the array fed for it (float32 for
    bfloat16, which enters through a Cast)."""
    a = np.asarray(r.standard_normal(shape) * scale, dtype=np.float32)
    if elem == BF16:
        return np.asarray(a.astype(ml_dtypes.bfloat16), dtype=np.float32)
    return np.asarray(a, dtype=NP_OF[elem])


def model(op, inputs, outputs, **attrs):
    """One `op` node. inputs: (name, array, elem type) triples, array None for an omitted input;
    outputs: (name, elem type) pairs, None for an omitted output. bfloat16 inputs and outputs pass
    through Casts from and to float32."""
    while inputs and inputs[-1][1] is None:
        inputs = inputs[:-1]
    nodes, graph_inputs, names = [], [], []
    for name, array, elem in inputs:
        if array is None:
            names.append("")
            continue
        if elem == BF16:
            graph_inputs.append(helper.make_tensor_value_info(name, F32, array.shape))
            nodes.append(helper.make_node("Cast", [name], [name + "_bf16"], to=BF16))
            names.append(name + "_bf16")
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, elem, array.shape))
            names.append(name)
    out_names, graph_outputs, casts = [], [], []
    for o in outputs:
        if o is None:
            out_names.append("")
            continue
        name, elem = o
        if elem == BF16:
            out_names.append(name + "_bf16")
            casts.append(helper.make_node("Cast", [name + "_bf16"], [name], to=F32))
            elem = F32
        else:
            out_names.append(name)
        graph_outputs.append(helper.make_tensor_value_info(name, elem, None))
    nodes.append(helper.make_node(op, names, out_names, domain=MS, name=f"{op}_node", **attrs))
    graph = helper.make_graph(nodes + casts, op, graph_inputs, graph_outputs)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    data = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    save_fuzz_seed(op, data)
    return data


def feeds(inputs):
    return {n: a for n, a, _ in inputs if a is not None}


def check(op, inputs, outputs, rtol=None, **attrs):
    """Runs the node in onnxruntime (one thread) and kiln and compares every output."""
    m = model(op, inputs, outputs, **attrs)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    want = onnxruntime.InferenceSession(m, options, providers=["CPUExecutionProvider"]).run(None, feeds(inputs))
    got = kiln.InferenceSession(m).run(None, feeds(inputs))
    assert len(got) == len(want)
    for (name, elem), w, g in zip([o for o in outputs if o], want, got):
        assert g.shape == w.shape, name
        assert g.dtype == w.dtype, name
        if np.issubdtype(w.dtype, np.floating):
            tol = rtol if rtol is not None else TOLERANCE.get(elem, 1e-5)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{op} output {name}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{op} output {name}")


def refused(op, inputs, outputs, match, **attrs):
    """kiln refuses the node (at load or run) with a message matching `match` naming the node."""
    m = model(op, inputs, outputs, **attrs)
    with pytest.raises(KILN_ERRORS, match=f"{op}_node.*{match}|{match}.*{op}_node"):
        kiln.InferenceSession(m).run(None, feeds(inputs))


def rng(seed=0):
    return np.random.default_rng(seed)


FLOATS = [F32, F16, BF16]


# ---- ScaledSiLU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("scale_elem", [None, F32, F16, BF16])
def test_scaled_silu(elem, scale_elem):
    r = rng(1)
    x = value(r, (3, 5, 7), elem, 4.0)
    scale = None if scale_elem is None else value(r, (), scale_elem, 2.0)
    check("ScaledSiLU", [("X", x, elem), ("scale", scale, scale_elem)], [("Y", elem)], alpha=0.75)


def test_scaled_silu_default_alpha():
    check("ScaledSiLU", [("X", value(rng(2), (64,)), F32)], [("Y", F32)])


def test_scaled_silu_refuses_a_scale_tensor():
    r = rng(3)
    refused("ScaledSiLU", [("X", value(r, (4,)), F32), ("scale", value(r, (2,)), F32)], [("Y", F32)],
            "scale must be a scalar")


# ---- GatedAdd -----------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", [F32, F16])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 8), (4, 1, 5)])
def test_gated_add(elem, shape):
    r = rng(4)
    gate = value(r, shape[:-1] + (1,), elem)
    check("GatedAdd", [("X", value(r, shape, elem), elem), ("Y", value(r, shape, elem), elem),
                       ("gate", gate, elem)], [("output", elem)])


def test_gated_add_refuses_a_gate_per_element():
    r = rng(5)
    refused("GatedAdd", [("X", value(r, (2, 4)), F32), ("Y", value(r, (2, 4)), F32),
                         ("gate", value(r, (2, 4)), F32)], [("output", F32)], "last dimension of 1")


def test_gated_add_refuses_gate_weight():
    r = rng(5)
    refused("GatedAdd", [("X", value(r, (2, 4)), F32), ("Y", value(r, (2, 4)), F32),
                         ("gate", value(r, (2, 3)), F32), ("gate_weight", value(r, (3, 1)), F32)],
            [("output", F32)], "gate_weight")


# ---- GatedRMSNorm -------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("activation", [None, "silu", "swish", "sigmoid"])
@pytest.mark.parametrize("shape,groups", [((2, 3, 16), 1), ((2, 3, 24), 3), ((5, 8), 2)])
def test_gated_rms_norm(elem, activation, shape, groups):
    r = rng(6)
    c = shape[-1] // groups
    attrs = {} if activation is None else {"activation": activation}
    check("GatedRMSNorm", [("X", value(r, shape, elem), elem), ("scale", value(r, (c,), elem), elem),
                           ("gate", value(r, shape, elem, 2.0), elem)], [("Y", elem)], epsilon=1e-4, **attrs)


def test_gated_rms_norm_refuses_a_scale_that_does_not_divide_x():
    r = rng(7)
    refused("GatedRMSNorm", [("X", value(r, (2, 10)), F32), ("scale", value(r, (4,)), F32),
                             ("gate", value(r, (2, 10)), F32)], [("Y", F32)], "must be a multiple of scale's 4")


# ---- BranchwiseRMSNorm --------------------------------------------------------------------------

BRANCHWISE_CASES = [  # (X shape, num_branches, scale shape)
    ((2, 3, 4, 8), 0, None),
    ((2, 3, 4, 8), 0, (8,)),
    ((2, 3, 4, 8), 0, (4, 8)),
    ((2, 3, 4, 8), 0, (32,)),
    ((2, 5, 24), 3, None),
    ((2, 5, 24), 3, (8,)),
    ((2, 5, 24), 3, (3, 8)),
    ((2, 5, 24), 3, (24,)),
]


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("scale_elem", [F32, "same"])
@pytest.mark.parametrize("shape,branches,scale_shape", BRANCHWISE_CASES)
def test_branchwise_rms_norm(elem, scale_elem, shape, branches, scale_shape):
    r = rng(8)
    s_elem = elem if scale_elem == "same" else scale_elem
    scale = None if scale_shape is None else value(r, scale_shape, s_elem)
    attrs = {"num_branches": branches} if branches else {}
    check("BranchwiseRMSNorm", [("X", value(r, shape, elem, 3.0), elem), ("scale", scale, s_elem)], [("Y", elem)],
          epsilon=1e-5, **attrs)


def test_branchwise_rms_norm_refuses_a_scale_of_another_width():
    r = rng(9)
    refused("BranchwiseRMSNorm", [("X", value(r, (2, 4, 8)), F32), ("scale", value(r, (6,)), F32)], [("Y", F32)],
            r"scale .* must be \(H\), \(C, H\) or \(C \* H\)")


# ---- UnfoldTensor -------------------------------------------------------------------------------

UNFOLD_CASES = [  # (shape, dim, size, step)
    ((10,), None, 3, None),
    ((2, 9, 4), 1, 3, 2),
    ((2, 9, 4), -1, 2, 1),
    ((3, 7, 5), 0, 3, 1),
    ((4, 8), 1, 8, 3),
]


@pytest.mark.parametrize("elem", [F32, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64])
@pytest.mark.parametrize("shape,dim,size,step", UNFOLD_CASES)
def test_unfold_tensor(elem, shape, dim, size, step):
    r = rng(10)
    x = (r.standard_normal(shape) * 100).astype(NP_OF[elem])
    attrs = {"size": size} | ({} if dim is None else {"dim": dim}) | ({} if step is None else {"step": step})
    check("UnfoldTensor", [("input", x, elem)], [("output", elem)], **attrs)


def test_unfold_tensor_refuses_a_window_past_the_dimension():
    refused("UnfoldTensor", [("input", np.zeros((2, 3), np.float32), F32)], [("output", F32)],
            r"input dimension 1 \(3\) is shorter than the window size 4", size=4)


# ---- HyperConnectionPreMix / HyperConnectionPostMix ---------------------------------------------

def streams_shape(lead, c, h, branches):
    return lead + ((c * h,) if branches else (c, h))


GATE_SUFFIXES = ["C", "C1", "CH", "flatCH"]


def gate_shape(lead, c, h, suffix):
    return lead + {"C": (c,), "C1": (c, 1), "CH": (c, h), "flatCH": (c * h,)}[suffix]


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("mix_elem", [F32, "same"])
@pytest.mark.parametrize("flattened", [False, True], ids=["grouped", "flattened"])
@pytest.mark.parametrize("suffix", GATE_SUFFIXES)
def test_hyper_connection_pre_mix(elem, mix_elem, flattened, suffix):
    if suffix == "flatCH" and not flattened:
        pytest.skip("(C * H) gates are for flattened streams")
    r = rng(11)
    lead, c, h = (2, 3), 4, 8
    m_elem = elem if mix_elem == "same" else mix_elem
    attrs = {"num_branches": c} if flattened else {}
    check("HyperConnectionPreMix", [("streams", value(r, streams_shape(lead, c, h, flattened), elem), elem),
                                    ("pre_mix", value(r, gate_shape(lead, c, h, suffix), m_elem), m_elem)],
          [("output", elem)], reduction_scale=0.5, **attrs)


def test_hyper_connection_pre_mix_refuses_a_gate_of_other_rows():
    r = rng(12)
    refused("HyperConnectionPreMix", [("streams", value(r, (2, 4, 8)), F32), ("pre_mix", value(r, (3, 4)), F32)],
            [("output", F32)], r"pre_mix 3x4 must have the streams' leading dimensions")


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("mix_elem", [F32, "same"])
@pytest.mark.parametrize("flattened", [False, True], ids=["grouped", "flattened"])
@pytest.mark.parametrize("suffix", ["C", "C1", "CH"])
@pytest.mark.parametrize("stream_mix", [False, True], ids=["identity", "stream_mix"])
def test_hyper_connection_post_mix(elem, mix_elem, flattened, suffix, stream_mix):
    r = rng(13)
    lead, c, h = (2, 3), 4, 8
    m_elem = elem if mix_elem == "same" else mix_elem
    attrs = {"num_branches": c} if flattened else {}
    mix = value(r, lead + (c, c), m_elem) if stream_mix else None
    check("HyperConnectionPostMix", [("streams", value(r, streams_shape(lead, c, h, flattened), elem), elem),
                                     ("block_output", value(r, lead + (h,), elem), elem),
                                     ("post_mix", value(r, gate_shape(lead, c, h, suffix), m_elem), m_elem),
                                     ("stream_mix", mix, m_elem)], [("output", elem)], **attrs)


def test_hyper_connection_post_mix_refuses_a_block_output_of_another_width():
    r = rng(14)
    refused("HyperConnectionPostMix", [("streams", value(r, (2, 4, 8)), F32), ("block_output", value(r, (2, 6)), F32),
                                       ("post_mix", value(r, (2, 4)), F32)], [("output", F32)],
            r"block_output 2x6 must be 2x8")


# ---- EngramGate ---------------------------------------------------------------------------------

@pytest.mark.parametrize("elem", [F32, F16])
@pytest.mark.parametrize("normed", [False, True], ids=["output", "with_normed"])
@pytest.mark.parametrize("shape", [(2, 3, 4, 16), (1, 5, 1, 8)])
def test_engram_gate(elem, normed, shape):
    r = rng(15)
    b, s, hc, h = shape
    inputs = [("key", value(r, shape, elem), elem), ("query", value(r, shape, elem), elem),
              ("value", value(r, (b, s, h), elem), elem), ("key_norm_scale", value(r, (hc, h), elem), elem),
              ("query_norm_scale", value(r, (hc, h), elem), elem),
              ("conv_norm_scale", value(r, (hc, h), elem) if normed else None, elem)]
    outputs = [("output", elem)] + ([("gated_value_normed", elem)] if normed else [])
    check("EngramGate", inputs, outputs, epsilon=1e-5)


def test_engram_gate_refuses_a_value_per_stream():
    r = rng(16)
    shape = (1, 2, 3, 8)
    refused("EngramGate", [("key", value(r, shape), F32), ("query", value(r, shape), F32),
                           ("value", value(r, shape), F32), ("key_norm_scale", value(r, (3, 8)), F32),
                           ("query_norm_scale", value(r, (3, 8)), F32)], [("output", F32)],
            r"value 1x2x3x8 must be 1x2x8")
