"""com.microsoft CausalConvWithState and VarlenCausalConvWithState against onnxruntime 1.32's CPU
kernels (the helpers of test_contrib_llm_recent_ops.py): every activation, dilation and layout the
CPU kernel accepts, bias and past state present and absent, prefill and decode lengths, each dtype
it registers (CausalConvWithState float32 and float16; the varlen op also bfloat16); and the
attributes onnxruntime runs on CUDA only, refused by name as its CPU kernel refuses them."""
import numpy as np
import pytest

from test_contrib_llm_recent_ops import BF16, F16, F32, check, refused, rng, value
from onnx import TensorProto

I32 = TensorProto.INT32
ACTIVATIONS = ["none", "silu", "swish"]

# ---- CausalConvWithState ------------------------------------------------------------------------

# (channels_last, input shape for length L): channels-first (B, C, L), channels-last (B, L, C) and
# channels-last with two channel axes (B, L, 2, 3).
LAYOUTS = {"first": (0, lambda L: (2, 6, L)), "last": (1, lambda L: (2, L, 6)),
           "last2": (1, lambda L: (2, L, 2, 3))}


def state_shape(channels_last, x_shape, state):
    s = list(x_shape)
    s[1 if channels_last else 2] = state
    return tuple(s)


def conv_inputs(r, elem, layout, length, k, dilation, with_bias, with_past):
    channels_last, shape_of = LAYOUTS[layout]
    x_shape = shape_of(length)
    past = value(r, state_shape(channels_last, x_shape, (k - 1) * dilation), elem) if with_past else None
    return [("input", value(r, x_shape, elem), elem), ("weight", value(r, (6, 1, k), elem), elem),
            ("bias", value(r, (6,), elem) if with_bias else None, elem), ("past_state", past, elem)]


@pytest.mark.parametrize("elem", [F32, F16])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dilation", [1, 2, 3])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("with_bias,with_past", [(False, False), (True, False), (False, True), (True, True)])
def test_causal_conv(elem, activation, dilation, layout, with_bias, with_past):
    r = rng(dilation * 7 + len(activation))
    for length in (1, 7):  # decode and prefill
        inputs = conv_inputs(r, elem, layout, length, 4, dilation, with_bias, with_past)
        check("CausalConvWithState", inputs, [("output", elem), ("present_state", elem)],
              activation=activation, dilation=dilation, channels_last=LAYOUTS[layout][0])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_causal_conv_one_tap_has_an_empty_state(layout):
    inputs = conv_inputs(rng(4), F32, layout, 5, 1, 2, True, False)
    check("CausalConvWithState", inputs, [("output", F32), ("present_state", F32)],
          channels_last=LAYOUTS[layout][0], dilation=2)


def test_causal_conv_defaults():
    inputs = conv_inputs(rng(5), F32, "first", 9, 3, 1, False, True)
    check("CausalConvWithState", inputs, [("output", F32), ("present_state", F32)])


CONV_OUT = [("output", F32), ("present_state", F32)]


@pytest.mark.parametrize("attrs,match", [
    ({"ndim": 2}, "ndim 2 is not implemented"),
    ({"ndim": 4}, "ndim must be 1, 2 or 3"),
    ({"state_window": 2}, "state_window 2 is not implemented"),
    ({"state_length": 6}, "state_length 6 is not implemented"),
    ({"input_channel_offset": 1}, "input_channel_offset 1 is not implemented"),
    ({"input_channels": 2}, "input_channels 2 is not implemented"),
    ({"state_channels_last": 1}, "state_channels_last 1 is not implemented"),
    ({"state_update_capacity": 2}, "state_update_capacity 2 is not implemented"),
    ({"activation": "gelu"}, "activation must be none, silu or swish"),
    ({"dilation": 0}, "dilation must be >= 1"),
    ({"channels_last": 2}, "channels_last must be 0 or 1"),
])
def test_causal_conv_refuses_attributes(attrs, match):
    inputs = conv_inputs(rng(6), F32, "first", 5, 3, 1, False, False)
    refused("CausalConvWithState", inputs, CONV_OUT, match, **attrs)


def test_causal_conv_refuses_state_update_output():
    inputs = conv_inputs(rng(7), F32, "first", 5, 3, 1, False, False)
    refused("CausalConvWithState", inputs, CONV_OUT + [("state_update", F32)],
            "state_update output is not implemented")


def test_causal_conv_refuses_bfloat16():
    inputs = conv_inputs(rng(8), BF16, "first", 5, 3, 1, False, False)
    refused("CausalConvWithState", inputs, [("output", BF16), ("present_state", BF16)],
            "input must be float32 or float16")


def test_causal_conv_refuses_bad_shapes():
    r = rng(9)
    x = value(r, (2, 6, 5))
    refused("CausalConvWithState", [("input", x, F32), ("weight", value(r, (5, 1, 3)), F32)], CONV_OUT,
            r"weight .*5x1x3.* must be \(6, 1, k\)")
    refused("CausalConvWithState", [("input", x, F32), ("weight", value(r, (6, 1, 3)), F32),
                                    ("bias", None, F32), ("past_state", value(r, (2, 6, 3)), F32)],
            CONV_OUT, r"past_state .*must be 2x6x4", dilation=2)
    refused("CausalConvWithState", [("input", value(r, (2, 5)), F32), ("weight", value(r, (6, 1, 3)), F32)],
            CONV_OUT, "input must be")
    refused("CausalConvWithState", [("input", x, F32), ("weight", value(r, (6, 1, 3)), F32)], CONV_OUT,
            "state length .*int64", dilation=2**62)


# ---- VarlenCausalConvWithState ------------------------------------------------------------------

CU = np.array([0, 3, 4, 4, 10], np.int32)  # lengths 3, 1, 0 and 6: prefill, decode, empty
CHANNELS = 5


def varlen_inputs(r, elem, k, dilation, with_bias, capture=None, cu=CU):
    batch, total = len(cu) - 1, int(cu[-1])
    inputs = [("input", value(r, (total, CHANNELS), elem), elem),
              ("weight", value(r, (CHANNELS, 1, k), elem), elem),
              ("cumulative_sequence_length", cu, I32),
              ("bias", value(r, (CHANNELS,), elem) if with_bias else None, elem),
              ("initial_state", value(r, (batch, CHANNELS, (k - 1) * dilation), elem), elem)]
    if capture is not None:
        inputs.append(("capture_count", np.array(capture, np.int32), I32))
    return inputs


@pytest.mark.parametrize("elem", [F32, F16, BF16])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("with_bias", [False, True])
def test_varlen_causal_conv(elem, activation, dilation, with_bias):
    inputs = varlen_inputs(rng(dilation + 3 * with_bias), elem, 4, dilation, with_bias)
    outputs = [("output", elem), ("final_state", elem)]
    check("VarlenCausalConvWithState", inputs, outputs, activation=activation, dilation=dilation)
    check("VarlenCausalConvWithState", inputs, outputs + [("state_update", elem)],
          activation=activation, dilation=dilation)


@pytest.mark.parametrize("elem", [F32, F16, BF16])
@pytest.mark.parametrize("capacity", [1, 2, 8])
@pytest.mark.parametrize("with_update", [False, True])
def test_varlen_causal_conv_state_update(elem, capacity, with_update):
    # capture counts below zero, zero, within and past the capacity and the request's length
    inputs = varlen_inputs(rng(capacity), elem, 3, 1, True, capture=[-1, 9, 1, 4])
    outputs = [("output", elem), ("final_state", elem)] + ([("state_update", elem)] if with_update else [])
    check("VarlenCausalConvWithState", inputs, outputs, state_update_capacity=capacity)
    inputs = varlen_inputs(rng(capacity), elem, 3, 1, True, capture=[2, 0, 3, 9])
    check("VarlenCausalConvWithState", inputs, outputs, state_update_capacity=capacity, activation="silu")


def test_varlen_causal_conv_one_tap():
    inputs = varlen_inputs(rng(11), F32, 1, 3, True)
    check("VarlenCausalConvWithState", inputs, [("output", F32), ("final_state", F32)], dilation=3)


VARLEN_OUT = [("output", F32), ("final_state", F32)]


@pytest.mark.parametrize("cu,match", [
    ([1, 3, 4, 4, 10], "must start at 0 and end at total_tokens 10"),
    ([0, 3, 4, 4, 9], "must start at 0 and end at total_tokens 10"),
    ([0, 5, 4, 4, 10], "must not decrease, got 5 then 4"),
])
def test_varlen_refuses_bad_offsets(cu, match):
    inputs = varlen_inputs(rng(12), F32, 3, 1, False)
    inputs[2] = ("cumulative_sequence_length", np.array(cu, np.int32), I32)
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, match)


@pytest.mark.parametrize("attrs,capture,match", [
    ({"state_update_capacity": 2}, None, "capture_count must be given exactly when"),
    ({}, [1, 1, 1, 1], "capture_count must be given exactly when"),
    ({"state_update_capacity": 9}, [1, 1, 1, 1], r"state_update_capacity must be in \[0, 8\]"),
    ({"activation": "relu"}, None, "activation must be none, silu or swish"),
    ({"dilation": -1}, None, "dilation must be >= 1"),
    ({"group_size": 2}, None, "group_size and delta_offset apply to kernel_delta only"),
])
def test_varlen_refuses_attributes(attrs, capture, match):
    inputs = varlen_inputs(rng(13), F32, 3, 1, False, capture=capture)
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, match, **attrs)


def test_varlen_refuses_dynamic_mode():
    r = rng(14)
    inputs = varlen_inputs(r, F32, 2, 1, False)
    inputs += [("capture_count", None, I32), ("kernel_delta", value(r, (10, 2, CHANNELS)), F32),
               ("previous_mask", value(r, (10, 1)), F32)]
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, "dynamic grouped mode .* not implemented")


def test_varlen_refuses_bad_shapes():
    r = rng(15)
    inputs = varlen_inputs(r, F32, 3, 2, False)
    inputs[4] = ("initial_state", value(r, (4, CHANNELS, 2)), F32)
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, r"initial_state .*must be 4x5x4", dilation=2)
    inputs = varlen_inputs(r, F32, 3, 1, False, capture=[1, 1])
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, r"capture_count .*must be 4",
            state_update_capacity=2)
    inputs = varlen_inputs(r, F32, 3, 1, False)
    inputs[1] = ("weight", value(r, (CHANNELS + 1, 1, 3)), F32)
    refused("VarlenCausalConvWithState", inputs, VARLEN_OUT, r"must be \(5, 1, k\)")
