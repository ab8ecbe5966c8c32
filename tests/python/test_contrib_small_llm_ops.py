"""com.microsoft LinearAttentionGate, MoEGroupRouter, NGramHashMapping and VarlenNGramHashMapping
(onnxruntime 1.32's CPU kernels): each case runs one node in onnxruntime and kiln on the same
random inputs and compares (the helpers and tolerances of test_contrib_llm_recent_ops.py: exact
for the integer outputs). Every attribute value and optional input onnxruntime's CPU kernel
accepts, each dtype it registers; then bad inputs, refused by both, kiln naming the node and what
is wrong."""
import itertools

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto

from test_contrib_llm_recent_ops import BF16, F16, F32, FLOATS, check, feeds, model, refused, rng, value

I32, I64 = TensorProto.INT32, TensorProto.INT64
NP_INT = {I32: np.int32, I64: np.int64}


def ort_refuses(op, inputs, outputs, **attrs):
    """onnxruntime's CPU kernel refuses the node too (at load or run)."""
    m = model(op, inputs, outputs, **attrs)
    with pytest.raises(Exception):
        onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds(inputs))


def both_refuse(op, inputs, outputs, match, **attrs):
    ort_refuses(op, inputs, outputs, **attrs)
    refused(op, inputs, outputs, match, **attrs)


# ---- LinearAttentionGate ------------------------------------------------------------------------

def gate_inputs(r, shape, elem, with_b=True, heads=None):
    h = shape[-1] if heads is None else heads
    b = value(r, shape, elem, 4.0) if with_b else None
    return [("a", value(r, shape, elem, 6.0), elem), ("dt_bias", value(r, (h,)), F32),
            ("decay_scale", -np.exp(value(r, (h,))), F32), ("b", b, elem)]


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("shape", [(2, 3, 4), (7,), (1, 5, 16)])
@pytest.mark.parametrize("b,beta", [(True, True), (True, False), (False, False)])
def test_linear_attention_gate(elem, shape, b, beta):
    outputs = [("decay", elem)] + ([("beta", elem)] if beta else [])
    check("LinearAttentionGate", gate_inputs(rng(1), shape, elem, b), outputs)


def test_linear_attention_gate_dt_bias_of_any_shape_with_one_value_per_head():
    r = rng(2)
    inputs = gate_inputs(r, (2, 3, 4), F32)
    inputs[1] = ("dt_bias", value(r, (2, 2)), F32)
    check("LinearAttentionGate", inputs, [("decay", F32), ("beta", F32)])


def test_linear_attention_gate_refuses_beta_without_b():
    both_refuse("LinearAttentionGate", gate_inputs(rng(3), (2, 4), F32, with_b=False),
                [("decay", F32), ("beta", F32)], "beta output needs the b input")


def test_linear_attention_gate_refuses_a_dt_bias_per_other_heads():
    both_refuse("LinearAttentionGate", gate_inputs(rng(3), (2, 4), F32, heads=3), [("decay", F32)],
                "dt_bias must hold 4 values")


def test_linear_attention_gate_refuses_b_of_another_shape():
    inputs = gate_inputs(rng(3), (2, 4), F32)
    inputs[3] = ("b", value(rng(4), (1, 4)), F32)
    both_refuse("LinearAttentionGate", inputs, [("decay", F32), ("beta", F32)], "b .* must have a's shape")


def test_linear_attention_gate_refuses_a_scalar():
    inputs = gate_inputs(rng(3), (), F32, heads=1)
    both_refuse("LinearAttentionGate", inputs, [("decay", F32)], "a must have rank 1 or more")


# ---- MoEGroupRouter ------------------------------------------------------------------------------

ROUTER_CASES = [  # (logits shape, attributes)
    ((5, 8), {"top_k": 2}),
    ((2, 3, 8), {"top_k": 3, "n_group": 2, "topk_group": 1}),
    ((4, 16), {"top_k": 4, "n_group": 4, "topk_group": 2, "group_topk": 1}),
    ((4, 16), {"top_k": 6, "n_group": 4, "topk_group": 3, "group_topk": 3, "router_sentinel": -30000.0}),
    ((3, 12), {"top_k": 5, "n_group": 3, "topk_group": 1, "group_topk": 9}),  # group_topk clamped, top_k > 4 chosen
    ((6, 8), {"top_k": 8, "n_group": 8, "topk_group": 8, "router_sentinel": 0.0}),
    ((1, 1, 4), {"top_k": 1, "n_group": 1, "topk_group": 1, "group_topk": 1}),
    ((0, 8), {"top_k": 2}),
]


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("shape,attrs", ROUTER_CASES)
def test_moe_group_router(elem, shape, attrs):
    r = rng(5)
    check("MoEGroupRouter", [("logits", value(r, shape, elem, 2.0), elem),
                             ("expert_bias", value(r, (shape[-1],), F32, 0.3), F32)],
          [("router_probs", elem)], **attrs)


@pytest.mark.parametrize("logits,attrs", [
    ([[0, 0, 0, 0, 0, 0, 0, 0]], {"top_k": 3}),
    ([[0, 0, 0, 0, 0, 0, 0, 0]], {"top_k": 3, "n_group": 4, "topk_group": 2}),
    ([[1, 2, 2, 1, 2, 1, 1, 2]], {"top_k": 3, "n_group": 2, "topk_group": 1}),
])
def test_moe_group_router_ties_go_to_the_lower_index(logits, attrs):
    check("MoEGroupRouter", [("logits", np.array(logits, np.float32), F32),
                             ("expert_bias", np.zeros(8, np.float32), F32)], [("router_probs", F32)], **attrs)


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 16)])
def test_moe_group_router_full_scores(elem, shape):
    r = rng(6)
    check("MoEGroupRouter", [("logits", value(r, shape, elem, 2.0), elem),
                             ("expert_bias", value(r, (shape[-1],), F32, 0.3), F32)],
          [None, ("selection_scores", F32), ("router_weights", F32)], top_k=2)


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("rows,width,experts", [(5, 256, 8), (17, 512, 12), (1, 256, 1)])
def test_moe_group_router_projection(elem, rows, width, experts):
    r = rng(7)
    check("MoEGroupRouter", [("logits", value(r, (rows, width), elem), elem),
                             ("expert_bias", value(r, (experts,), F32, 0.3), F32),
                             ("projection_weight", value(r, (experts, width), elem, 0.06), elem)],
          [None, ("selection_scores", F32), ("router_weights", F32)], rtol=1e-4, top_k=1)


def router_inputs(r, shape=(3, 8), experts=None):
    e = shape[-1] if experts is None else experts
    return [("logits", value(r, shape), F32), ("expert_bias", value(r, (e,)), F32)]


FULL = [None, ("selection_scores", F32), ("router_weights", F32)]


@pytest.mark.parametrize("outputs,match", [
    ([None, ("selection_scores", F32)], "selection_scores and router_weights must be requested together"),
    ([None, None, ("router_weights", F32)], "selection_scores and router_weights must be requested together"),
    ([("router_probs", F32), ("selection_scores", F32), ("router_weights", F32)], "cannot be combined"),
])
def test_moe_group_router_refuses_mixed_outputs(outputs, match):
    both_refuse("MoEGroupRouter", router_inputs(rng(8)), outputs, match, top_k=2)


@pytest.mark.parametrize("attrs,match", [
    ({"top_k": 0}, "top_k must be positive"),
    ({"top_k": -1}, "top_k must be positive"),
    ({"top_k": 2, "n_group": 0}, "n_group must be positive"),
    ({"top_k": 2, "topk_group": 0}, "topk_group must be positive"),
    ({"top_k": 2, "group_topk": 0}, "group_topk must be positive"),
    ({"top_k": 2, "n_group": 2, "topk_group": 3}, "topk_group 3 must not exceed n_group 2"),
    ({"top_k": 2, "n_group": 3}, "8 experts must split evenly into n_group 3"),
    ({"top_k": 9}, "top_k 9 must not exceed the 8 experts"),
])
def test_moe_group_router_refuses_bad_attributes(attrs, match):
    both_refuse("MoEGroupRouter", router_inputs(rng(9)), [("router_probs", F32)], match, **attrs)


def test_moe_group_router_refuses_full_scores_with_groups():
    both_refuse("MoEGroupRouter", router_inputs(rng(10)), FULL, "need n_group = topk_group = 1", top_k=2, n_group=2)


def test_moe_group_router_refuses_full_scores_past_512_experts():
    both_refuse("MoEGroupRouter", router_inputs(rng(10), (2, 513)), FULL, "512 experts or fewer", top_k=2)


def test_moe_group_router_refuses_an_expert_bias_of_another_length():
    both_refuse("MoEGroupRouter", router_inputs(rng(10), experts=7), [("router_probs", F32)],
                "expert_bias must hold 8 values", top_k=2)


def test_moe_group_router_refuses_rank_1_logits():
    both_refuse("MoEGroupRouter", router_inputs(rng(10), (8,)), [("router_probs", F32)], "rank 2 or more", top_k=2)


def projected(r, width=256, weight_width=None, rank=2):
    shape = (5, width) if rank == 2 else (1, 5, width)
    return [("logits", value(r, shape), F32), ("expert_bias", value(r, (8,)), F32),
            ("projection_weight", value(r, (8, weight_width or width)), F32)]


@pytest.mark.parametrize("inputs,outputs,match", [
    (projected(rng(11)), [("router_probs", F32)], "projection_weight needs the full-score outputs"),
    (projected(rng(11), 255), FULL, "positive multiple of 256"),
    (projected(rng(11), 512, 256), FULL, "projection_weight's width 256 must match the logits' 512"),
    (projected(rng(11), rank=3), FULL, r"projected logits must be \(rows, width\)"),
])
def test_moe_group_router_refuses_bad_projections(inputs, outputs, match):
    both_refuse("MoEGroupRouter", inputs, outputs, match, top_k=2)


# ---- NGramHashMapping ---------------------------------------------------------------------------

EOS = 3  # the ids are drawn from 0..5, so EOS resets happen often


def ids_of(r, shape, elem):
    return r.integers(0, 6, shape).astype(NP_INT[elem])


def hash_tables(r, elem, n, heads, multipliers_extra=0):
    """multipliers (large, so the products wrap), vocab_sizes."""
    big = 2**30 if elem == I32 else 2**62
    multipliers = (r.integers(-big, big, n + multipliers_extra) | 1).astype(NP_INT[elem])
    vocab = r.integers(1, 1000, (n - 1) * heads).astype(NP_INT[elem])
    return multipliers, vocab


def ngram_inputs(r, elem, batch, length, n, heads, past=False, offsets=False, eos=False, segments=False,
                 negative_offsets=False):
    multipliers, vocab = hash_tables(r, elem, n, heads, multipliers_extra=1)
    low = -500 if negative_offsets else 0
    return [("input_ids", ids_of(r, (batch, length), elem), elem), ("multipliers", multipliers, elem),
            ("vocab_sizes", vocab, elem),
            ("past_ids", ids_of(r, (batch, n - 1), elem) if past else None, elem),
            ("head_offsets", r.integers(low, 2**20, (n - 1) * heads).astype(NP_INT[elem]) if offsets else None, elem),
            ("eos_token_id", np.array(EOS, NP_INT[elem]) if eos else None, elem),
            ("segment_ids", r.integers(0, 2, (batch, length)).astype(np.int32) if segments else None, I32)]


EOS_MODES = [(False, 0), (True, 0), (True, 1), (True, 7)]  # (eos_token_id given, reset_on_eos)


@pytest.mark.parametrize("elem", [I32, I64])
@pytest.mark.parametrize("past,offsets,segments", list(itertools.product([False, True], repeat=3)))
@pytest.mark.parametrize("eos,reset", EOS_MODES)
def test_ngram_hash_mapping(elem, past, offsets, segments, eos, reset):
    r = rng(12)
    for batch, length, n, heads, pad in [(2, 9, 3, 2, 0), (1, 4, 5, 1, 2), (3, 1, 2, 3, 4)]:
        inputs = ngram_inputs(r, elem, batch, length, n, heads, past, offsets, eos, segments)
        check("NGramHashMapping", inputs, [("hash_ids", elem), ("present_ids", elem)],
              max_ngram_size=n, n_head_per_ngram=heads, pad_id=pad, reset_on_eos=reset)


@pytest.mark.parametrize("elem", [I32, I64])
def test_ngram_hash_mapping_without_present_and_reset_attribute(elem):
    check("NGramHashMapping", ngram_inputs(rng(13), elem, 2, 6, 4, 2), [("hash_ids", elem)],
          max_ngram_size=4, n_head_per_ngram=2, pad_id=-5)


@pytest.mark.parametrize("past", [False, True])
def test_ngram_hash_mapping_empty_sequence(past):
    check("NGramHashMapping", ngram_inputs(rng(14), I64, 2, 0, 3, 2, past=past),
          [("hash_ids", I64), ("present_ids", I64)], max_ngram_size=3, n_head_per_ngram=2, pad_id=1)


NGRAM_ATTRS = {"max_ngram_size": 3, "n_head_per_ngram": 2, "pad_id": 0}


def small_ngram(**replace):
    inputs = ngram_inputs(rng(15), I64, 2, 4, 3, 2, past=True, offsets=True, eos=True, segments=True)
    return [(name, replace.get(name, a), elem) for name, a, elem in inputs]


@pytest.mark.parametrize("inputs,attrs,match", [
    (small_ngram(vocab_sizes=np.array([5, 0, 7, 9], np.int64)), {}, "vocab_sizes must be positive; entry 1 is 0"),
    (small_ngram(vocab_sizes=np.array([5, 3, -7, 9], np.int64)), {}, "vocab_sizes must be positive; entry 2 is -7"),
    (small_ngram(head_offsets=np.array([5, 3, -1, 9], np.int64)), {}, "head_offsets must be non-negative; entry 2"),
    (small_ngram(multipliers=np.array([3, 5], np.int64)), {}, "multipliers .* at least max_ngram_size 3"),
    (small_ngram(vocab_sizes=np.array([5, 3, 7], np.int64)), {}, "vocab_sizes has shape 3, must be 4"),
    (small_ngram(head_offsets=np.array([[5, 3], [7, 9]], np.int64)), {}, "head_offsets has shape 2x2, must be 4"),
    (small_ngram(past_ids=np.zeros((2, 3), np.int64)), {}, "past_ids has shape 2x3, must be 2x2"),
    (small_ngram(segment_ids=np.zeros((2, 3), np.int32)), {}, "segment_ids has shape 2x3, must be 2x4"),
    (small_ngram(eos_token_id=np.array([3], np.int64)), {}, "eos_token_id has shape 1, must be scalar"),
    (small_ngram(input_ids=np.zeros(4, np.int64)), {}, r"input_ids must be \(batch, sequence\)"),
    (small_ngram(), {"max_ngram_size": 1}, "max_ngram_size must be at least 2"),
    (small_ngram(), {"n_head_per_ngram": 0}, "n_head_per_ngram must be positive"),
    (small_ngram(), {"n_head_per_ngram": 2**62}, "overflow|past int64"),
])
def test_ngram_hash_mapping_refuses(inputs, attrs, match):
    both_refuse("NGramHashMapping", inputs, [("hash_ids", I64), ("present_ids", I64)], match, **(NGRAM_ATTRS | attrs))


def test_ngram_hash_mapping_refuses_a_pad_id_past_int32():
    inputs = [(n, a if a is None or a.dtype == np.int32 else a.astype(np.int32), I32 if n != "segment_ids" else I32)
              for n, a, _ in small_ngram()]
    both_refuse("NGramHashMapping", inputs, [("hash_ids", I32)], "pad_id 1099511627776 is out of range for int32",
                **(NGRAM_ATTRS | {"pad_id": 2**40}))


# ---- VarlenNGramHashMapping ---------------------------------------------------------------------

def varlen_inputs(r, elem, lengths, n, heads, past=False, offsets=False, eos=False, segments=0,
                  capacity=0):
    """segments: 0 none, 1 segment_ids, 2 segment_ids and past_segment_ids."""
    multipliers, vocab = hash_tables(r, elem, n, heads)
    batch, tokens = len(lengths), int(sum(lengths))
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return [("input_ids", ids_of(r, (tokens,), elem), elem), ("multipliers", multipliers, elem),
            ("vocab_sizes", vocab, elem), ("cumulative_sequence_length", cu, I32),
            ("past_ids", ids_of(r, (batch, n - 1), elem) if past else None, elem),
            ("head_offsets", r.integers(-2**20, 2**20, (n - 1) * heads).astype(NP_INT[elem]) if offsets else None,
             elem),
            ("eos_token_id", np.array(EOS, NP_INT[elem]) if eos else None, elem),
            ("segment_ids", r.integers(0, 2, tokens).astype(np.int32) if segments else None, I32),
            ("past_segment_ids", r.integers(0, 2, (batch, n - 1)).astype(np.int32) if segments == 2 else None, I32),
            ("capture_count", r.integers(-1, 7, batch).astype(np.int32) if capacity else None, I32)]


def varlen_outputs(elem, segments, capacity):
    return [("hash_ids", elem), ("present_ids", elem), ("present_segment_ids", I32) if segments else None,
            ("state_update", elem) if capacity else None]


@pytest.mark.parametrize("elem", [I32, I64])
@pytest.mark.parametrize("past,offsets", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("eos,reset", EOS_MODES)
@pytest.mark.parametrize("segments", [0, 1, 2])
@pytest.mark.parametrize("capacity", [0, 3, 8])
def test_varlen_ngram_hash_mapping(elem, past, offsets, eos, reset, segments, capacity):
    r = rng(16)
    for lengths, n, heads, pad in [([3, 1, 6, 2], 3, 2, 0), ([9], 4, 1, 2), ([1, 1, 5], 2, 3, 4)]:
        inputs = varlen_inputs(r, elem, lengths, n, heads, past, offsets, eos, segments, capacity)
        check("VarlenNGramHashMapping", inputs, varlen_outputs(elem, segments, capacity),
              max_ngram_size=n, n_head_per_ngram=heads, pad_id=pad, reset_on_eos=reset,
              state_update_capacity=capacity)


@pytest.mark.parametrize("elem", [I32, I64])
def test_varlen_ngram_hash_mapping_state_update_alone(elem):
    check("VarlenNGramHashMapping", varlen_inputs(rng(17), elem, [4, 2], 3, 2, eos=True, capacity=2),
          [("hash_ids", elem), None, None, ("state_update", elem)],
          max_ngram_size=3, n_head_per_ngram=2, pad_id=1, state_update_capacity=2)


def test_varlen_ngram_hash_mapping_capacity_without_state_update_output():
    check("VarlenNGramHashMapping", varlen_inputs(rng(17), I64, [4, 2], 3, 2, capacity=2), [("hash_ids", I64)],
          max_ngram_size=3, n_head_per_ngram=2, pad_id=1, state_update_capacity=2)


VARLEN_ATTRS = {"max_ngram_size": 3, "n_head_per_ngram": 2, "pad_id": 0}


def small_varlen(**replace):
    inputs = varlen_inputs(rng(18), I64, [2, 2], 3, 2, past=True, eos=True, segments=2)
    return [(name, replace.get(name, a), elem) for name, a, elem in inputs]


def cu(*values):
    return np.array(values, np.int32)


@pytest.mark.parametrize("inputs,outputs,attrs,match", [
    (small_varlen(cumulative_sequence_length=cu(0, 3, 2, 4), past_ids=None, past_segment_ids=None), None, {}, "must grow strictly"),
    (small_varlen(cumulative_sequence_length=cu(0, 2, 2, 4), past_ids=None, past_segment_ids=None), None, {}, "must grow strictly"),
    (small_varlen(cumulative_sequence_length=cu(1, 2, 4)), None, {}, r"cumulative_sequence_length\[0\] must be 0"),
    (small_varlen(cumulative_sequence_length=cu(0, 2, 3)), None, {}, "not total_tokens 4"),
    (small_varlen(cumulative_sequence_length=cu(0, 2, 5)), None, {}, "not total_tokens 4"),
    (small_varlen(cumulative_sequence_length=cu(0)), None, {}, "at least 2 values"),
    (small_varlen(cumulative_sequence_length=cu(0, 1, 2, 3, 4, 4)), None, {}, "fewer than the 5 requests"),
    (small_varlen(vocab_sizes=np.array([5, 0, 7, 9], np.int64)), None, {}, "vocab_sizes must be positive; entry 1"),
    (small_varlen(input_ids=np.zeros((2, 2), np.int64)), None, {}, r"input_ids must be 1-D"),
    (small_varlen(past_segment_ids=np.zeros((2, 3), np.int32)), None, {}, "past_segment_ids has shape 2x3, must be 2x2"),
    (small_varlen(segment_ids=np.zeros(3, np.int32)), None, {}, "segment_ids has shape 3, must be 4"),
    (small_varlen(segment_ids=None), None, {}, "past_segment_ids needs the segment_ids input"),
    (small_varlen(segment_ids=None, past_segment_ids=None), [("hash_ids", I64), None, ("present_segment_ids", I32)],
     {}, "present_segment_ids output needs the segment_ids input"),
    (small_varlen(), None, {"state_update_capacity": 9}, r"state_update_capacity must be in \[0, 8\]"),
    (small_varlen(), None, {"state_update_capacity": -1}, r"state_update_capacity must be in \[0, 8\]"),
    (small_varlen(), None, {"state_update_capacity": 2}, "capture_count must be given exactly when"),
    (small_varlen(capture_count=cu(1, 1)), None, {}, "capture_count must be given exactly when"),
    (small_varlen(capture_count=cu(1, 1, 1)), None, {"state_update_capacity": 2}, "capture_count has shape 3, must be 2"),
])
def test_varlen_ngram_hash_mapping_refuses(inputs, outputs, attrs, match):
    both_refuse("VarlenNGramHashMapping", inputs, outputs or [("hash_ids", I64), ("present_ids", I64)], match,
                **(VARLEN_ATTRS | attrs))
