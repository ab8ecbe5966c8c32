"""The KV cache of ONNX Runtime's attention contrib ops (com.microsoft): MultiHeadAttention's
past_key / past_value and present_key / present_value, Attention's past / present, and
GroupQueryAttention, each compared with onnxruntime's CPU kernel on the same random inputs: a
prompt step, then a decoding step fed the prompt's present cache (onnxruntime's, in both, so that
each step is compared on the same inputs)."""
import numpy as np
import onnxruntime
import pytest

import kiln
from test_contrib_ops import attention_mask, contrib_model, feeds_of, rng, run_both


def compare(op, inputs, outputs, constants=(), rtol=1e-5, atol=1e-5, **attrs):
    """Runs the node in both, compares every output and returns onnxruntime's by name."""
    model = contrib_model(op, inputs, outputs, constants, **attrs)
    ort, ours = run_both(model, feeds_of(inputs, constants))
    names = [o if isinstance(o, str) else o[0] for o in outputs if o]
    for name, want, got in zip(names, ort, ours):
        assert got.shape == want.shape, name
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{op} output {name}")
    return dict(zip(names, ort))


def normal(r, shape, dtype=np.float32):
    return r.standard_normal(shape).astype(dtype)


# ---- MultiHeadAttention ------------------------------------------------------------------------

MHA_CASES = [  # (bias, key padding mask, unidirectional, attention_bias, qk output, extra attributes)
    (False, None, 0, False, False, {}),
    (True, None, 0, False, False, {}),
    (True, "2d", 0, False, False, {}),
    (False, None, 1, False, False, {}),
    (True, "lengths", 1, True, False, {"scale": 0.3}),
    (False, "2d", 0, True, True, {"mask_filter_value": -1000.0}),
]


@pytest.mark.parametrize("bias,mask,unidirectional,attention_bias,qk,attrs", MHA_CASES)
def test_multi_head_attention_kv_cache(bias, mask, unidirectional, attention_bias, qk, attrs):
    r = rng(40)
    batch, seq, heads, head, value_head = 2, 4, 3, 8, 8
    past = None
    for step, length in enumerate([seq, 1]):
        total = length + (0 if past is None else past[0].shape[2])
        inputs = [("query", normal(r, (batch, length, heads * head))),
                  ("key", normal(r, (batch, length, heads * head))),
                  ("value", normal(r, (batch, length, heads * value_head))),
                  ("bias", normal(r, heads * (2 * head + value_head)) if bias else None),
                  ("key_padding_mask", attention_mask(r, mask, batch, total, [total, total - 1])),
                  ("attention_bias", normal(r, (batch, heads, length, total)) if attention_bias else None),
                  ("past_key", None if past is None else past[0]), ("past_value", None if past is None else past[1])]
        outputs = ["output", "present_key", "present_value"] + (["qk"] if qk else [])
        got = compare("MultiHeadAttention", inputs, outputs, {"bias"}, rtol=1e-4, atol=1e-5, num_heads=heads,
                      unidirectional=unidirectional, **attrs)
        past = (got["present_key"], got["present_value"])
    assert past[0].shape == (batch, heads, seq + 1, head)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("present", [False, True])
def test_multi_head_attention_4d_key_value(bias, present):
    """Key and value as the cache itself, [batch, num_heads, length, head size] (a decoder's
    cross-attention); a bias adds only to the query then, as in onnxruntime."""
    r = rng(41)
    batch, seq, kv_seq, heads, head = 2, 3, 5, 2, 8
    inputs = [("query", normal(r, (batch, seq, heads * head))), ("key", normal(r, (batch, heads, kv_seq, head))),
              ("value", normal(r, (batch, heads, kv_seq, head))),
              ("bias", normal(r, 3 * heads * head) if bias else None)]
    outputs = ["output"] + (["present_key", "present_value"] if present else [])
    compare("MultiHeadAttention", inputs, outputs, {"bias"}, rtol=1e-4, num_heads=heads)


def test_multi_head_attention_qk_without_cache():
    r = rng(42)
    inputs = [("query", normal(r, (2, 3, 16))), ("key", normal(r, (2, 5, 16))), ("value", normal(r, (2, 5, 12))),
              ("bias", None), ("key_padding_mask", attention_mask(r, "2d", 2, 5, None))]
    compare("MultiHeadAttention", inputs, ["output", None, None, "qk"], rtol=1e-4, num_heads=4)


def test_multi_head_attention_past_of_another_batch_is_refused():
    r = rng(43)
    inputs = [("query", normal(r, (2, 1, 16))), ("key", normal(r, (2, 1, 16))), ("value", normal(r, (2, 1, 16))),
              ("bias", None), ("key_padding_mask", None), ("attention_bias", None),
              ("past_key", normal(r, (3, 2, 4, 8))), ("past_value", normal(r, (3, 2, 4, 8)))]
    model = contrib_model("MultiHeadAttention", inputs, ["output", "present_key", "present_value"], num_heads=2)
    with pytest.raises(kiln.InvalidArgument, match=r"MultiHeadAttention_node.*past_key float32\[3x2x4x8\] must be "
                                                   r"\[batch, num_heads, past, head size\] 2x2x4x8"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))


# ---- Attention ---------------------------------------------------------------------------------

ATTENTION_CASES = [  # (mask form, unidirectional, attention_bias on the prompt, extra attributes)
    (None, 0, False, {}),
    ("2d", 0, False, {}),
    (None, 1, False, {}),
    ("lengths", 1, True, {"scale": 0.2}),
    ("3d", 0, False, {"mask_filter_value": -500.0, "qkv_hidden_sizes": [24, 24, 24]}),
]


@pytest.mark.parametrize("mask,unidirectional,attention_bias,attrs", ATTENTION_CASES)
def test_attention_past_present(mask, unidirectional, attention_bias, attrs):
    r = rng(44)
    batch, seq, hidden_in, hidden, heads = 2, 5, 16, 24, 3
    weights = (normal(r, (hidden_in, 3 * hidden)) * 0.3).astype(np.float32)
    bias = normal(r, 3 * hidden)
    past = None
    for length in [seq, 1, 1]:
        total = length + (0 if past is None else past.shape[3])
        mask_index = attention_mask(r, mask, batch, total, [total, total - 2])
        if mask == "3d":
            mask_index = mask_index[:, -length:, :]
        inputs = [("input", normal(r, (batch, length, hidden_in))), ("weights", weights), ("bias", bias),
                  ("mask_index", mask_index), ("past", past),
                  ("attention_bias", normal(r, (1, heads, length, total)) if attention_bias and past is None else None)]
        got = compare("Attention", inputs, ["output", "present"], {"weights", "bias"}, rtol=1e-4, atol=1e-5,
                      num_heads=heads, unidirectional=unidirectional, **attrs)
        past = got["present"]
    assert past.shape == (2, batch, heads, seq + 2, hidden // heads)


@pytest.mark.parametrize("sizes", [[16, 16, 32], [32, 32, 8]])
def test_attention_qkv_hidden_sizes(sizes):
    r = rng(45)
    batch, seq, hidden_in, heads = 2, 4, 12, 4
    inputs = [("input", normal(r, (batch, seq, hidden_in))), ("weights", normal(r, (hidden_in, sum(sizes)))),
              ("bias", normal(r, sum(sizes))), ("mask_index", attention_mask(r, "2d", batch, seq, None))]
    compare("Attention", inputs, ["output"], {"weights", "bias"}, rtol=1e-4, atol=1e-5, num_heads=heads,
            qkv_hidden_sizes=sizes)


def test_attention_past_of_another_head_size_is_refused():
    r = rng(46)
    inputs = [("input", normal(r, (1, 1, 8))), ("weights", normal(r, (8, 24))), ("bias", None), ("mask_index", None),
              ("past", normal(r, (2, 1, 2, 3, 5)))]
    model = contrib_model("Attention", inputs, ["output", "present"], {"weights"}, num_heads=2)
    with pytest.raises(kiln.InvalidArgument, match=r"Attention_node.*past float32\[2x1x2x3x5\] must be \[2, batch 1, "
                                                   r"num_heads 2, past length, head size 4\]"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs, {"weights"}))


def test_attention_do_rotary_is_refused_by_name():
    r = rng(47)
    inputs = [("input", normal(r, (1, 3, 8))), ("weights", normal(r, (8, 24)))]
    model = contrib_model("Attention", inputs, ["output"], {"weights"}, num_heads=2, do_rotary=1)
    with pytest.raises(kiln.NotImplemented, match="Attention_node.*'do_rotary' = 1 is not supported.*onnxruntime's CPU"):
        kiln.InferenceSession(model)


# ---- GroupQueryAttention -----------------------------------------------------------------------

def rotary_caches(r, positions, half):
    angles = np.outer(np.arange(positions), 1.0 / (10000 ** (np.arange(half) / half))).astype(np.float32)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


GQA_CASES = [  # attributes and inputs of the case
    {},
    {"kv_num_heads": 4},
    {"packed": True},
    {"do_rotary": 1},
    {"do_rotary": 1, "rotary_interleaved": 1, "packed": True},
    {"do_rotary": 1, "rotary_half": 8, "head": 32},  # rotary dim 16 of head size 32
    {"local_window_size": 3},
    {"softcap": 2.0},
    {"smooth_softmax": 1},
    {"head_sink": True},
    {"attention_bias": True, "scale": 0.2},
    {"qk_output": 1},
    {"qk_output": 2, "local_window_size": 2, "softcap": 3.0},
    {"buffer": 12},
    {"do_rotary": 1, "position_ids": True},
]


def gqa_inputs(r, case, batch, seq, total, past, heads, kv_heads, head):
    packed = case.get("packed", False)
    q = normal(r, (batch, seq, (heads + 2 * kv_heads) * head if packed else heads * head))
    half = case.get("rotary_half", head // 2)
    cos, sin = rotary_caches(r, 32, half) if case.get("do_rotary") else (None, None)
    positions = None
    if case.get("position_ids"):
        start = total - seq
        positions = np.tile(np.arange(start, total, dtype=np.int64), (batch, 1))
    return [("query", q), ("key", None if packed else normal(r, (batch, seq, kv_heads * head))),
            ("value", None if packed else normal(r, (batch, seq, kv_heads * head))),
            ("past_key", None if past is None else past[0]), ("past_value", None if past is None else past[1]),
            ("seqlens_k", np.full(batch, total - 1, np.int32)), ("total_sequence_length", np.array(total, np.int32)),
            ("cos_cache", cos), ("sin_cache", sin), ("position_ids", positions),
            ("attention_bias", normal(r, (batch, 1, seq, total)) if case.get("attention_bias") else None),
            ("head_sink", normal(r, heads) if case.get("head_sink") else None)]


@pytest.mark.parametrize("case", GQA_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_group_query_attention_prompt_then_decode(case):
    """A prompt of 5 tokens, then two generation steps each fed the previous present cache."""
    r = rng(50)
    batch, seq, heads, head = 2, 5, 4, case.get("head", 16)
    kv_heads = case.get("kv_num_heads", 2)
    attrs = {k: v for k, v in case.items() if k in ("do_rotary", "rotary_interleaved", "local_window_size", "softcap",
                                                  "smooth_softmax", "scale", "qk_output")}
    outputs = ["output", "present_key", "present_value"] + (["output_qk"] if case.get("qk_output") else [])
    past = None
    if case.get("buffer"):  # a past buffer longer than the tokens so far (onnxruntime-genai's shared buffer)
        past = (np.zeros((batch, kv_heads, case["buffer"], head), np.float32),) * 2
    total = 0
    for length in [seq, 1, 1]:
        total += length
        inputs = gqa_inputs(r, case, batch, length, total, past, heads, kv_heads, head)
        got = compare("GroupQueryAttention", inputs, outputs, rtol=1e-4, atol=1e-5, num_heads=heads,
                      kv_num_heads=kv_heads, **attrs)
        past = (got["present_key"], got["present_value"])


def gqa_case_inputs(r, batch, seq, seqlens, total, past, heads=4, kv_heads=2, head=16, rotary=False):
    cos, sin = rotary_caches(r, 32, head // 2) if rotary else (None, None)
    return [("query", normal(r, (batch, seq, heads * head))), ("key", normal(r, (batch, seq, kv_heads * head))),
            ("value", normal(r, (batch, seq, kv_heads * head))),
            ("past_key", None if past is None else past[0]), ("past_value", None if past is None else past[1]),
            ("seqlens_k", np.array(seqlens, np.int32)), ("total_sequence_length", np.array(total, np.int32)),
            ("cos_cache", cos), ("sin_cache", sin)]


@pytest.mark.parametrize("rotary", [False, True])
def test_group_query_attention_ragged_batch(rotary):
    """A right-padded prompt (entry 1 has 3 of 5 tokens), then generation steps in a shared
    buffer of 8 rows where the two entries have different lengths."""
    r = rng(51)
    attrs = {"num_heads": 4, "kv_num_heads": 2, "do_rotary": int(rotary)}
    outputs = ["output", "present_key", "present_value"]
    got = compare("GroupQueryAttention", gqa_case_inputs(r, 2, 5, [4, 2], 5, None, rotary=rotary), outputs,
                  rtol=1e-4, atol=1e-5, **attrs)
    buffer = [np.zeros((2, 2, 8, 16), np.float32) for _ in range(2)]
    for cache, present in zip(buffer, (got["present_key"], got["present_value"])):
        cache[:, :, :5] = present
    past = tuple(buffer)
    for lengths in ([5, 3], [6, 4]):  # seqlens_k: the new token lands at row seqlens_k of each entry
        got = compare("GroupQueryAttention", gqa_case_inputs(r, 2, 1, lengths, 8, past, rotary=rotary), outputs,
                      rtol=1e-4, atol=1e-5, **attrs)
        past = (got["present_key"], got["present_value"])


def test_group_query_attention_later_prompt_chunk():
    """A prompt in two chunks (batch 1): the second of 3 tokens after 4 in the cache."""
    r = rng(52)
    attrs = {"num_heads": 4, "kv_num_heads": 1, "do_rotary": 1, "local_window_size": 5}
    outputs = ["output", "present_key", "present_value"]
    got = compare("GroupQueryAttention", gqa_case_inputs(r, 1, 4, [3], 4, None, kv_heads=1, rotary=True), outputs,
                  rtol=1e-4, atol=1e-5, **attrs)
    past = (got["present_key"], got["present_value"])
    compare("GroupQueryAttention", gqa_case_inputs(r, 1, 3, [6], 7, past, kv_heads=1, rotary=True), outputs,
            rtol=1e-4, atol=1e-5, **attrs)


def test_group_query_attention_not_causal():
    r = rng(53)
    compare("GroupQueryAttention", gqa_case_inputs(r, 2, 4, [3, 3], 4, None), ["output", "present_key", "present_value"],
            rtol=1e-4, atol=1e-5, num_heads=4, kv_num_heads=2, causal=0)


def test_group_query_attention_seqlens_past_the_buffer_are_refused():
    r = rng(54)
    past = (normal(r, (2, 2, 4, 16)), normal(r, (2, 2, 4, 16)))
    inputs = gqa_case_inputs(r, 2, 1, [4, 9], 5, past)
    model = contrib_model("GroupQueryAttention", inputs, ["output", "present_key", "present_value"], num_heads=4,
                          kv_num_heads=2)
    with pytest.raises(kiln.InvalidArgument, match=r"GroupQueryAttention_node.*seqlens_k\[1\] = 9 does not fit the "
                                                   r"step: total length 10 must be 1..5"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))


def test_group_query_attention_quantized_cache_is_refused_by_name():
    r = rng(55)
    inputs = gqa_case_inputs(r, 1, 2, [1], 2, None) + [("position_ids", None), ("attention_bias", None),
                                                       ("head_sink", None), ("k_scale", np.ones(1, np.float32))]
    model = contrib_model("GroupQueryAttention", inputs, ["output"], num_heads=4, kv_num_heads=2)
    with pytest.raises(kiln.NotImplemented, match="GroupQueryAttention_node.*input 'k_scale' \\(a quantized KV cache\\)"):
        kiln.InferenceSession(model)


# ---- float16 (onnxruntime's CPU kernels of the three ops register it; both compute in float) ----

def test_multi_head_attention_float16_kv_cache():
    r = rng(60)
    batch, heads, head = 2, 2, 8
    past = None
    for length in [3, 1]:
        inputs = [("query", normal(r, (batch, length, heads * head), np.float16)),
                  ("key", normal(r, (batch, length, heads * head), np.float16)),
                  ("value", normal(r, (batch, length, heads * head), np.float16)),
                  ("bias", normal(r, 3 * heads * head, np.float16)), ("key_padding_mask", None), ("attention_bias", None),
                  ("past_key", None if past is None else past[0]), ("past_value", None if past is None else past[1])]
        got = compare("MultiHeadAttention", inputs, [("output", np.float16), ("present_key", np.float16),
                                                     ("present_value", np.float16)], {"bias"}, rtol=2e-3, atol=2e-3,
                      num_heads=heads, unidirectional=1)
        past = (got["present_key"], got["present_value"])


def test_attention_float16_past_present():
    r = rng(61)
    weights = (normal(r, (8, 48)) * 0.3).astype(np.float16)
    past = None
    for length in [4, 1]:
        inputs = [("input", normal(r, (2, length, 8), np.float16)), ("weights", weights),
                  ("bias", normal(r, 48, np.float16)), ("mask_index", None), ("past", past)]
        got = compare("Attention", inputs, [("output", np.float16), ("present", np.float16)], {"weights", "bias"},
                      rtol=2e-3, atol=2e-3, num_heads=4, unidirectional=1)
        past = got["present"]


@pytest.mark.parametrize("rotary", [False, True])
def test_group_query_attention_float16(rotary):
    r = rng(62)
    outputs = [("output", np.float16), ("present_key", np.float16), ("present_value", np.float16)]
    past = None
    for length, total in [(4, 4), (1, 5)]:
        inputs = gqa_case_inputs(r, 2, length, [total - 1, total - 1], total, past, rotary=rotary)
        inputs = [(n, a.astype(np.float16) if a is not None and a.dtype == np.float32 else a) for n, a in inputs]
        got = compare("GroupQueryAttention", inputs, outputs, rtol=2e-3, atol=2e-3, num_heads=4, kv_num_heads=2,
                      do_rotary=int(rotary))
        past = (got["present_key"], got["present_value"])


# ---- MRotaryEmbedding (Qwen2-VL's rotary of temporal, height and width positions) -------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout,section,interleaved,four_d,rotary_dim,scale", [
    (0, [4, 2, 2], 0, False, 0, None),
    (1, [4, 2, 2], 0, False, 0, None),
    (0, [2, 1, 1], 1, False, 8, 0.5),
    (1, [2, 3, 3], 0, True, 0, None),
])
def test_mrotary_embedding(dtype, layout, section, interleaved, four_d, rotary_dim, scale):
    r = rng(56)
    batch, seq, heads, head = 2, 5, 3, 16
    half = (rotary_dim or head) // 2
    cos, sin = rotary_caches(r, 20, half)
    shape = (batch, heads, seq, head) if four_d else (batch, seq, heads * head)
    inputs = [("input", normal(r, shape, dtype)), ("position_ids", r.integers(0, 20, (3, batch, seq)).astype(np.int64)),
              ("cos_cache", cos.astype(dtype)), ("sin_cache", sin.astype(dtype))]
    attrs = {"mrope_section": section, "mrope_layout": layout, "interleaved": interleaved}
    if not four_d or rotary_dim:
        attrs["num_heads"] = heads
    if rotary_dim:
        attrs["rotary_embedding_dim"] = rotary_dim
    if scale is not None:
        attrs["scale"] = scale
    tol = 1e-3 if dtype == np.float16 else 1e-5
    compare("MRotaryEmbedding", inputs, [("output", dtype)], rtol=tol, atol=tol, **attrs)


def test_mrotary_embedding_position_past_the_cache_is_refused():
    r = rng(57)
    cos, sin = rotary_caches(r, 4, 8)
    inputs = [("input", normal(r, (1, 2, 32))), ("position_ids", np.full((3, 1, 2), 7, np.int64)),
              ("cos_cache", cos), ("sin_cache", sin)]
    model = contrib_model("MRotaryEmbedding", inputs, ["output"], num_heads=2, mrope_section=[4, 2, 2])
    with pytest.raises(kiln.InvalidArgument, match="MRotaryEmbedding_node.*position id 7 is outside the caches"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))


# ---- DecoderMaskedMultiHeadAttention (one decoding token, shared past / present buffer) --------

def dmmha_self_inputs(r, batch, heads, head, buffer, past_length, mask=False, attention_bias=False, bias=False,
                      beams=None, dtype=np.float32):
    hidden = heads * head
    total = past_length + 1
    mask_index = None
    if mask:
        mask_index = np.ones((batch, total), np.int32)
        mask_index[0, 1] = 0
    inputs = [("query", normal(r, (batch, 1, hidden), dtype)), ("key", normal(r, (batch, 1, hidden), dtype)),
              ("value", normal(r, (batch, 1, hidden), dtype)), ("mask_index", mask_index),
              ("attention_bias", normal(r, (batch, heads, 1, total), dtype) if attention_bias else None),
              ("past_key", normal(r, (batch, heads, buffer, head), dtype)),
              ("past_value", normal(r, (batch, heads, buffer, head), dtype)),
              ("past_sequence_length", np.array(past_length, np.int32)),
              ("beam_width", None if beams is None else np.array(beams, np.int32)),
              ("cache_indirection", None if beams is None else
               r.integers(0, beams, (batch // beams, beams, buffer)).astype(np.int32)),
              ("bias", normal(r, 3 * hidden, dtype) if bias else None)]
    return inputs


@pytest.mark.parametrize("mask,attention_bias,bias,qk,beams", [
    (False, False, False, False, None), (True, False, True, False, None), (False, True, False, True, None),
    (True, True, True, True, None), (False, False, True, False, 2), (True, False, False, True, 2)])
def test_decoder_masked_multi_head_attention_self(mask, attention_bias, bias, qk, beams):
    r = rng(58)
    inputs = dmmha_self_inputs(r, 4, 2, 8, 7, 4, mask, attention_bias, bias, beams)
    outputs = ["output", "present_key", "present_value"] + (["qk"] if qk else [])
    compare("DecoderMaskedMultiHeadAttention", inputs, outputs, {"bias"}, rtol=1e-4, atol=1e-5, num_heads=2,
            past_present_share_buffer=1, output_qk=int(qk), mask_filter_value=-300.0)


@pytest.mark.parametrize("mask,qk,bias", [(False, False, False), (True, True, True)])
def test_decoder_masked_multi_head_attention_cross(mask, qk, bias):
    r = rng(59)
    batch, heads, head, length = 2, 2, 8, 6
    mask_index = None
    if mask:
        mask_index = np.ones((batch, length), np.int32)
        mask_index[1, 4:] = 0
    inputs = [("query", normal(r, (batch, 1, heads * head))), ("key", normal(r, (batch, heads, length, head))),
              ("value", normal(r, (batch, heads, length, head))), ("mask_index", mask_index)] + \
             [(n, None) for n in ("attention_bias", "past_key", "past_value", "past_sequence_length", "beam_width",
                                  "cache_indirection")] + [("bias", normal(r, 3 * heads * head) if bias else None)]
    outputs = ["output", None, None] + (["qk"] if qk else [])
    compare("DecoderMaskedMultiHeadAttention", inputs, outputs, {"bias"}, rtol=1e-4, atol=1e-5, num_heads=heads,
            output_qk=int(qk))


def test_decoder_masked_multi_head_attention_float16():
    r = rng(63)
    inputs = dmmha_self_inputs(r, 2, 2, 8, 6, 3, mask=True, dtype=np.float16)
    outputs = [("output", np.float16), ("present_key", np.float16), ("present_value", np.float16)]
    compare("DecoderMaskedMultiHeadAttention", inputs, outputs, rtol=2e-3, atol=2e-3, num_heads=2,
            past_present_share_buffer=1)


def test_decoder_masked_multi_head_attention_full_buffer_is_refused():
    r = rng(64)
    inputs = dmmha_self_inputs(r, 1, 2, 8, 4, 4)
    model = contrib_model("DecoderMaskedMultiHeadAttention", inputs, ["output", "present_key", "present_value"],
                          num_heads=2, past_present_share_buffer=1)
    with pytest.raises(kiln.InvalidArgument, match="DecoderMaskedMultiHeadAttention_node.*past_sequence_length 4 "
                                                   "leaves no row for the new token in the past buffer of 4 rows"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))


# ---- SparseAttention (block-sparse; onnxruntime runs it only with past and present bound to one
# buffer, so its side runs through an IOBinding) ---------------------------------------------------

def run_ort_shared_buffers(model, feeds, shared):
    """onnxruntime's outputs with each input of `shared` (input name -> output name) bound to its
    output as one OrtValue, in the graph's output order."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    buffers = {}
    for name, array in feeds.items():
        if name in shared:
            buffers[shared[name]] = onnxruntime.OrtValue.ortvalue_from_numpy(array.copy())
            binding.bind_ortvalue_input(name, buffers[shared[name]])
        else:
            binding.bind_cpu_input(name, array)
    for output in session.get_outputs():
        if output.name in buffers:
            binding.bind_ortvalue_output(output.name, buffers[output.name])
        else:
            binding.bind_output(output.name)
    session.run_with_iobinding(binding)
    return binding.copy_outputs_to_cpu()


def block_layouts(max_blocks):
    """Two CSR layouts of a causal block mask: dense (every block up to the diagonal) and local
    (the first block, the previous one and the diagonal)."""
    layouts = []
    for local in (False, True):
        rows, cols = [0], []
        for r in range(max_blocks):
            blocks = sorted({0, max(r - 1, 0), r}) if local else list(range(r + 1))
            cols += blocks
            rows.append(len(cols))
        layouts.append((rows, cols))
    nnz = max(len(c) for _, c in layouts)
    row_indices = np.array([r for r, _ in layouts], np.int32)
    col_indices = np.array([c + [0] * (nnz - len(c)) for _, c in layouts], np.int32)
    return row_indices, col_indices


def sparse_inputs(r, batch, seq, total, buffers, heads, kv_heads, head, packed, rotary, dtype):
    rows, cols = block_layouts(4)
    q = normal(r, (batch, seq, (heads + 2 * kv_heads) * head if packed else heads * head), dtype)
    cos, sin = rotary_caches(r, 64, head // 2) if rotary else (None, None)
    return [("query", q), ("key", None if packed else normal(r, (batch, seq, kv_heads * head), dtype)),
            ("value", None if packed else normal(r, (batch, seq, kv_heads * head), dtype)),
            ("past_key", buffers[0]), ("past_value", buffers[1]), ("block_row_indices", rows),
            ("block_col_indices", cols), ("total_sequence_length", np.array([total], np.int32)),
            ("key_total_sequence_lengths", np.full(batch, total, np.int32)),
            ("cos_cache", None if cos is None else cos.astype(dtype)),
            ("sin_cache", None if sin is None else sin.astype(dtype))]


@pytest.mark.parametrize("packed,rotary,kv_heads,dtype", [
    (False, False, 2, np.float32), (True, False, 4, np.float32), (False, True, 2, np.float32),
    (True, True, 1, np.float32), (False, True, 2, np.float16)])
def test_sparse_attention_prompt_then_decode(packed, rotary, kv_heads, dtype):
    """A prompt of 50 tokens in blocks of 16 (the local layout hides block 1 from the queries of
    block 3, positions 48 on), then two generation steps in the same 64-row buffer."""
    r = rng(65)
    batch, heads, head, seq = 2, 4, 16, 50
    buffers = tuple(np.zeros((batch, kv_heads, 64, head), dtype) for _ in range(2))
    tol = 2e-3 if dtype == np.float16 else 1e-5
    total = 0
    for length in [seq, 1, 1]:
        total += length
        inputs = sparse_inputs(r, batch, length, total, buffers, heads, kv_heads, head, packed, rotary, dtype)
        model = contrib_model("SparseAttention", inputs, [("output", dtype), ("present_key", dtype),
                                                          ("present_value", dtype)],
                              num_heads=heads, kv_num_heads=kv_heads, sparse_block_size=16, do_rotary=int(rotary))
        feeds = feeds_of(inputs)
        ort = run_ort_shared_buffers(model, feeds, {"past_key": "present_key", "past_value": "present_value"})
        ours = kiln.InferenceSession(model).run(None, feeds)
        for name, want, got in zip(["output", "present_key", "present_value"], ort, ours):
            assert got.shape == want.shape and got.dtype == want.dtype, name
            np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol, err_msg=f"SparseAttention {name}")
        buffers = (ort[1], ort[2])


def test_sparse_attention_column_past_the_layout_is_refused():
    r = rng(66)
    buffers = (np.zeros((1, 2, 64, 16), np.float32),) * 2
    inputs = sparse_inputs(r, 1, 4, 4, buffers, 2, 2, 16, False, False, np.float32)
    inputs[6] = ("block_col_indices", np.array([[0, 0, 1, 0, 1, 2, 0, 1, 2, 9]] * 2, np.int32))
    model = contrib_model("SparseAttention", inputs, ["output", "present_key", "present_value"], num_heads=2,
                          kv_num_heads=2, sparse_block_size=16)
    with pytest.raises(kiln.InvalidArgument, match="SparseAttention_node.*block_col_indices holds block 9 of 4"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))


# ---- bad input: an error naming the node, never a crash or a read out of bounds ---------------

KILN_ERRORS = (kiln.InvalidArgument, kiln.InvalidGraph, kiln.NotImplemented, kiln.Fail)


def bad_cases():
    r = rng(70)
    f = lambda *shape: normal(r, shape)  # noqa: E731
    i32 = lambda *values: np.array(values, np.int32)  # noqa: E731
    gqa = dict(num_heads=4, kv_num_heads=2)
    gqa_base = [("query", f(1, 1, 64)), ("key", f(1, 1, 32)), ("value", f(1, 1, 32)),
                ("past_key", f(1, 2, 4, 16)), ("past_value", f(1, 2, 4, 16)), ("seqlens_k", i32(4)),
                ("total_sequence_length", np.array(5, np.int32))]

    def replaced(base, **changes):
        return [(n, changes.get(n, a)) for n, a in base]
    cos, sin = rotary_caches(r, 4, 8)
    rows, cols = block_layouts(4)
    sparse_base = sparse_inputs(r, 1, 1, 5, (np.zeros((1, 2, 64, 16), np.float32),) * 2, 2, 2, 16, False, False,
                                np.float32)
    dmmha_base = dmmha_self_inputs(r, 2, 2, 8, 6, 3, beams=2)
    return [
        ("GroupQueryAttention", replaced(gqa_base, seqlens_k=i32(-7)), gqa),
        ("GroupQueryAttention", replaced(gqa_base, seqlens_k=i32(4, 4)), gqa),
        ("GroupQueryAttention", replaced(gqa_base, past_key=f(1, 2, 4, 8)), gqa),
        ("GroupQueryAttention", replaced(gqa_base, total_sequence_length=i32(5, 6)), gqa),
        ("GroupQueryAttention", replaced(gqa_base, query=f(1, 1, 60)), gqa),
        ("GroupQueryAttention", replaced(gqa_base, key=f(1, 2, 32), value=f(1, 2, 32)), gqa),
        ("GroupQueryAttention", gqa_base + [("cos_cache", cos), ("sin_cache", sin)], dict(gqa, do_rotary=1)),
        ("GroupQueryAttention", gqa_base + [("cos_cache", cos[:, :4]), ("sin_cache", sin)], dict(gqa, do_rotary=1)),
        ("GroupQueryAttention", gqa_base + [(n, None) for n in ("cos_cache", "sin_cache", "position_ids")] +
         [("attention_bias", f(1, 4, 1, 3))], gqa),
        ("GroupQueryAttention", gqa_base + [(n, None) for n in ("cos_cache", "sin_cache", "position_ids",
                                                               "attention_bias")] + [("head_sink", f(3))], gqa),
        ("MultiHeadAttention", [("query", f(2, 3, 16)), ("key", f(2, 3, 16)), ("value", f(2, 3, 16)), ("bias", f(7))],
         dict(num_heads=2)),
        ("MultiHeadAttention", [("query", f(2, 3, 16)), ("key", f(2, 2, 3, 8)), ("value", f(2, 2, 4, 8))],
         dict(num_heads=2)),
        ("MultiHeadAttention", [("query", f(2, 1, 16)), ("key", f(2, 1, 16)), ("value", f(2, 1, 16)), ("bias", None),
                                ("key_padding_mask", np.ones((2, 3), np.int32)), ("attention_bias", None),
                                ("past_key", f(2, 2, 4, 8)), ("past_value", f(2, 2, 4, 8))], dict(num_heads=2)),
        ("Attention", [("input", f(1, 2, 8)), ("weights", f(8, 24)), ("bias", None), ("mask_index", None),
                       ("past", f(2, 1, 2, 3))], dict(num_heads=2)),
        ("Attention", [("input", f(1, 2, 8)), ("weights", f(8, 24)), ("bias", f(23))], dict(num_heads=2)),
        ("DecoderMaskedMultiHeadAttention", replaced(dmmha_base, past_sequence_length=np.zeros(0, np.int32)),
         dict(num_heads=2, past_present_share_buffer=1)),
        ("DecoderMaskedMultiHeadAttention", replaced(dmmha_base, past_sequence_length=np.array(-2, np.int32)),
         dict(num_heads=2, past_present_share_buffer=1)),
        ("DecoderMaskedMultiHeadAttention", replaced(dmmha_base, cache_indirection=np.full((1, 2, 6), 5, np.int32)),
         dict(num_heads=2, past_present_share_buffer=1)),
        ("DecoderMaskedMultiHeadAttention", replaced(dmmha_base, cache_indirection=np.zeros((2, 2, 6), np.int32)),
         dict(num_heads=2, past_present_share_buffer=1)),
        ("SparseAttention", replaced(sparse_base, block_row_indices=rows[:, ::-1].copy()), dict(num_heads=2, kv_num_heads=2, sparse_block_size=16)),
        ("SparseAttention", replaced(sparse_base, block_row_indices=rows[:1]), dict(num_heads=3, kv_num_heads=3, sparse_block_size=16)),
        ("SparseAttention", replaced(sparse_base, total_sequence_length=i32(70), key_total_sequence_lengths=i32(70)),
         dict(num_heads=2, kv_num_heads=2, sparse_block_size=16)),
        ("MRotaryEmbedding", [("input", f(1, 2, 32)), ("position_ids", np.zeros((3, 2, 2), np.int64)),
                              ("cos_cache", cos), ("sin_cache", sin)], dict(num_heads=2, mrope_section=[4, 2, 2])),
        ("MRotaryEmbedding", [("input", f(1, 2, 32)), ("position_ids", np.zeros((3, 1, 2), np.int64)),
                              ("cos_cache", cos), ("sin_cache", sin)], dict(num_heads=2, mrope_section=[4, 2, 1])),
    ]


@pytest.mark.parametrize("index", range(len(bad_cases())))
def test_bad_input_is_refused_naming_the_node(index):
    op, inputs, attrs = bad_cases()[index]
    outputs = {"GroupQueryAttention": ["output", "present_key", "present_value"],
               "MultiHeadAttention": ["output", "present_key", "present_value"],
               "Attention": ["output", "present"], "SparseAttention": ["output", "present_key", "present_value"],
               "DecoderMaskedMultiHeadAttention": ["output", "present_key", "present_value"],
               "MRotaryEmbedding": ["output"]}[op]
    model = contrib_model(op, inputs, outputs, **attrs)
    with pytest.raises(KILN_ERRORS, match=f"{op}_node"):
        kiln.InferenceSession(model).run(None, feeds_of(inputs))
