"""com.microsoft LinearAttention and GatedDeltaNet against onnxruntime 1.32's CPU kernels, with the
helpers of test_contrib_llm_recent_ops.py: every update rule, head layout (grouped, inverse grouped,
fewer key heads), optional input and dtype onnxruntime's CPU kernel runs, on the same random
inputs; and bad inputs, checked by kiln's message. Keys are L2-normalized for the delta rules,
whose recurrence diverges without (as both ops' docs say)."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import kiln
from test_contrib_llm_recent_ops import (BF16, F16, F32, KILN_ERRORS, TOLERANCE, check, feeds, model, refused,
                                        rng, value)

RULES = ["linear", "gated", "delta", "gated_delta"]


def normalized(a, head):
    """a (..., H * head) with each head vector of unit length."""
    shaped = a.reshape(a.shape[:-1] + (-1, head)).astype(np.float32)
    shaped = shaped / np.linalg.norm(shaped, axis=-1, keepdims=True)
    return shaped.reshape(a.shape).astype(a.dtype)


# ---- LinearAttention ----------------------------------------------------------------------------

def la_inputs(r, rule, elem, state_elem, q_heads, kv_heads, k_heads, past, decay_per_key, beta_per_head,
              batch=2, steps=3, dk=4, dv=3, gates=None):
    """The six inputs; decay and beta are given to the rules that read them, or to all when gates."""
    gated = rule in ("gated", "gated_delta") if gates is None else gates
    delta = rule in ("delta", "gated_delta") if gates is None else gates
    k = value(r, (batch, steps, k_heads * dk), elem)
    k = normalized(k, dk) if rule in ("delta", "gated_delta") else k
    decay = -np.abs(value(r, (batch, steps, kv_heads * (dk if decay_per_key else 1)), elem, 0.5))
    beta = np.abs(value(r, (batch, steps, kv_heads if beta_per_head else 1), elem, 0.5))
    return [("query", value(r, (batch, steps, q_heads * dk), elem), elem), ("key", k, elem),
            ("value", value(r, (batch, steps, kv_heads * dv), elem), elem),
            ("past_state", value(r, (batch, kv_heads, dk, dv), state_elem, 0.5) if past else None,
             state_elem),
            ("decay", decay if gated else None, elem),
            ("beta", beta if delta else None, elem)]


HEADS = [(4, 2, 2), (2, 4, 2), (2, 2, 1), (1, 3, 3), (3, 3, 3)]  # q_num_heads, kv_num_heads, key heads


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("elem,state_elem", [(F32, F32), (F16, F16), (F16, F32)])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention(rule, elem, state_elem, heads, past):
    q_heads, kv_heads, k_heads = heads
    r = rng(len(rule) + 7 * q_heads + 3 * kv_heads + k_heads + past)
    inputs = la_inputs(r, rule, elem, state_elem, q_heads, kv_heads, k_heads, past,
                       decay_per_key=q_heads % 2 == 0, beta_per_head=kv_heads % 2 == 0)
    present_elem = state_elem if past else elem  # without past_state, the query's type
    check("LinearAttention", inputs, [("output", elem), ("present_state", present_elem)],
          update_rule=rule, q_num_heads=q_heads, kv_num_heads=kv_heads)


@pytest.mark.parametrize("rule", RULES)
def test_linear_attention_bfloat16_beyond_onnxruntime(rule):
    """onnxruntime's CPU EP has no bfloat16 LinearAttention; kiln's, on bfloat16 values, is
    onnxruntime's float32 result rounded to bfloat16."""
    inputs = la_inputs(rng(9), rule, BF16, BF16, 4, 2, 2, True, True, True)
    as_float = [(n, a, F32) for n, a, _ in inputs]
    attrs = dict(update_rule=rule, q_num_heads=4, kv_num_heads=2)
    outputs = [("output", BF16), ("present_state", BF16)]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    want = onnxruntime.InferenceSession(model("LinearAttention", as_float, [("output", F32), ("present_state", F32)],
                                              **attrs), options, providers=["CPUExecutionProvider"]).run(None, feeds(as_float))
    got = kiln.InferenceSession(model("LinearAttention", inputs, outputs, **attrs)).run(None, feeds(inputs))
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=TOLERANCE[BF16], atol=TOLERANCE[BF16])


@pytest.mark.parametrize("decay_per_key", [False, True])
@pytest.mark.parametrize("beta_per_head", [False, True])
def test_linear_attention_gate_widths(decay_per_key, beta_per_head):
    inputs = la_inputs(rng(3), "gated_delta", F32, F32, 4, 2, 1, True, decay_per_key, beta_per_head)
    check("LinearAttention", inputs, [("output", F32), ("present_state", F32)],
          q_num_heads=4, kv_num_heads=2)


@pytest.mark.parametrize("rule", RULES)
def test_linear_attention_ignores_gates_its_rule_does_not_read(rule):
    inputs = la_inputs(rng(4), rule, F32, F32, 2, 2, 2, False, True, True, gates=True)
    check("LinearAttention", inputs, [("output", F32), ("present_state", F32)],
          update_rule=rule, q_num_heads=2, kv_num_heads=2)


@pytest.mark.parametrize("attrs", [dict(scale=0.3), dict(chunk_size=16), dict(chunk_size=1, scale=2.0)])
@pytest.mark.parametrize("steps", [1, 5])
def test_linear_attention_scale_chunk_size_and_decode(attrs, steps):
    inputs = la_inputs(rng(5), "gated_delta", F32, F32, 2, 2, 2, True, False, True, steps=steps)
    check("LinearAttention", inputs, [("output", F32), ("present_state", F32)],
          q_num_heads=2, kv_num_heads=2, **attrs)


def la_refused(match, inputs=None, **attrs):
    attrs = {"q_num_heads": 2, "kv_num_heads": 2, **attrs}
    inputs = inputs or la_inputs(rng(7), "gated_delta", F32, F32, 2, 2, 2, True, False, True)
    refused("LinearAttention", inputs, [("output", F32), ("present_state", F32)], match, **attrs)


def test_linear_attention_refuses_a_state_window():
    # onnxruntime's CPU kernel refuses state_window > 0 too (CUDA only).
    la_refused("state_window 2 .*not implemented", state_window=2)


def test_linear_attention_refuses_bad_attributes():
    la_refused("update_rule must be linear, gated, delta or gated_delta, got 'rwkv'", update_rule="rwkv")
    la_refused("state_window must be in \\[0, 8\\], got -1", state_window=-1)
    la_refused("q_num_heads and kv_num_heads must be positive", q_num_heads=0)
    la_refused("q_num_heads 3 and kv_num_heads 2: the larger must be a multiple", q_num_heads=3)


def test_linear_attention_refuses_bad_inputs():
    r = rng(8)
    base = la_inputs(r, "gated_delta", F32, F32, 2, 2, 2, True, False, True)
    def replaced(name, array):
        return [(n, array if n == name else a, e) for n, a, e in base]
    la_refused("needs the decay input", replaced("decay", None))
    la_refused("needs the beta input", replaced("beta", None))
    la_refused("past_state .* must be \\(B, kv_num_heads, dk, dv\\)",
               replaced("past_state", value(r, (2, 2, 3, 4))))
    la_refused("beta .* must be \\(B, T, kv_num_heads or 1\\)", replaced("beta", value(r, (2, 3, 3))))
    la_refused("decay .* must be \\(B, T, kv_num_heads or kv_num_heads \\* dk\\)",
               replaced("decay", value(r, (2, 2, 2))))
    la_refused("key .*: hidden size must be a number of heads of size 4",
               replaced("key", value(r, (2, 3, 12))))
    la_refused("key .* differs from query .* in B or T", replaced("key", value(r, (2, 2, 8))))
    la_refused("query .*: hidden size is not q_num_heads", replaced("query", value(r, (2, 3, 1))))


# ---- GatedDeltaNet ------------------------------------------------------------------------------

I32 = TensorProto.INT32
GDN_INPUTS = ["query", "key", "value", "cu_seqlens", "decay", "beta", "initial_state", "a_log",
              "dt_bias", "capture_count", "state_update_active"]
GDN_TYPES = {"cu_seqlens": I32, "capture_count": I32, "state_update_active": I32,
             "initial_state": F32, "a_log": F32, "dt_bias": F32}


def gdn_case(r, rule="gated_delta", elem=F32, gate_elem=None, layout="tokens", ragged=True,
             state=True, per_key=False, heads=(2, 4), dk=4, dv=3, lengths=(2, 4), gate="none",
             bias_shape="head", **extra):
    """GatedDeltaNet inputs by name. layout: 'tokens' ([N, H, D]), 'batched' ([B, S, H, D]),
    'packed' ([N, W]) or 'packed_batched' ([B, S, W]); batched layouts use equal lengths."""
    gate_elem = gate_elem or elem
    hq, hv = heads
    batch = len(lengths)
    lead = (sum(lengths),) if layout in ("tokens", "packed") else (batch, lengths[0])
    q = value(r, lead + (hq, dk), elem)
    k = value(r, lead + (hq, dk), elem)
    if rule in ("delta", "gated_delta"):
        k = normalized(k.reshape(lead + (-1,)), dk).reshape(k.shape)
    v = value(r, lead + (hv, dv), elem)
    x = dict(query=q, key=k, value=v)
    if layout.startswith("packed"):
        x = dict(query=np.concatenate([a.reshape(lead + (-1,)) for a in (q, k, v)], axis=-1))
    if ragged and layout in ("tokens", "packed"):
        x["cu_seqlens"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    if state:
        x["initial_state"] = value(r, (batch, hv, dv, dk), F32, 0.5)
    if rule in ("gated", "gated_delta"):
        d = value(r, lead + (hv, dk) if per_key else lead + (hv,), gate_elem, 0.5)
        x["decay"] = d if gate != "none" else -np.abs(d)
    if rule in ("delta", "gated_delta"):
        b = value(r, lead + (hv,), gate_elem, 0.5)
        x["beta"] = b if extra.get("beta_activation") == "sigmoid" else np.abs(b)
    if gate != "none":
        x["a_log"] = value(r, (hv,), F32, 0.5)
        x["dt_bias"] = value(r, {"head": (hv,), "head_key": (hv, dk), "flat": (hv * dk,)}[bias_shape],
                             F32, 0.5)
    return x


def gdn_inputs(x, elem, gate_elem):
    types = dict(GDN_TYPES, query=elem, key=elem, value=elem, decay=gate_elem, beta=gate_elem)
    return [(n, x.get(n), types[n]) for n in GDN_INPUTS]


def gdn_run(x, elem=F32, gate_elem=None, final=True, update=False, **attrs):
    """Runs the node in onnxruntime and kiln; returns both lists of outputs."""
    inputs = gdn_inputs(x, elem, gate_elem or elem)
    outputs = [("output", elem), ("final_state", F32) if final else None]
    if update:
        outputs.append(("state_update", F32))
    m = model("GatedDeltaNet", inputs, outputs, **attrs)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    want = onnxruntime.InferenceSession(m, options, providers=["CPUExecutionProvider"]).run(None, feeds(inputs))
    got = kiln.InferenceSession(m).run(None, feeds(inputs))
    return want, got


def gdn_check(x, elem=F32, gate_elem=None, final=True, **attrs):
    inputs = gdn_inputs(x, elem, gate_elem or elem)
    check("GatedDeltaNet", inputs, [("output", elem), ("final_state", F32) if final else None],
          rtol=TOLERANCE[elem] * 2 if elem != F32 else 2e-5, **attrs)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("layout,ragged", [("tokens", True), ("tokens", False), ("batched", False),
                                           ("packed", True), ("packed", False), ("packed_batched", False)])
def test_gated_delta_net_rules_and_layouts(rule, layout, ragged):
    lengths = (2, 4) if ragged else (3, 3)
    x = gdn_case(rng(len(rule) + len(layout)), rule, layout=layout, ragged=ragged, lengths=lengths)
    gdn_check(x, update_rule=rule)


@pytest.mark.parametrize("elem,gate_elem", [(F16, F16), (F16, F32), (BF16, BF16), (BF16, F32)])
@pytest.mark.parametrize("rule", ["gated_delta", "linear"])
def test_gated_delta_net_dtypes(elem, gate_elem, rule):
    x = gdn_case(rng(11), rule, elem=elem, gate_elem=gate_elem)
    gdn_check(x, elem, gate_elem, update_rule=rule)


@pytest.mark.parametrize("gate", ["none", "softplus", "qwen", "sigmoid", "kda"])
@pytest.mark.parametrize("per_key,bias_shape", [(False, "head"), (True, "head"), (True, "head_key"),
                                                (True, "flat")])
@pytest.mark.parametrize("beta_activation", ["none", "sigmoid"])
def test_gated_delta_net_gates(gate, per_key, bias_shape, beta_activation):
    x = gdn_case(rng(12), per_key=per_key, gate=gate, bias_shape=bias_shape,
                 beta_activation=beta_activation)
    attrs = dict(gate_activation=gate, beta_activation=beta_activation)
    if gate in ("sigmoid", "kda"):
        attrs["gate_lower_bound"] = -2.5
    gdn_check(x, **attrs)


@pytest.mark.parametrize("attrs", [dict(qk_l2_norm=1), dict(qk_l2_norm=0, scale=0.4),
                                   dict(qk_l2_norm=1, scale=1.5, chunk_size=16), dict(chunk_size=32)])
@pytest.mark.parametrize("heads", [(2, 2), (1, 3), (2, 6)])
def test_gated_delta_net_norm_scale_and_heads(attrs, heads):
    x = gdn_case(rng(13), heads=heads)
    if attrs.get("qk_l2_norm"):
        x["key"] = x["key"] * 3.0  # unnormalized keys: the op normalizes them
        x["key"][0, 0] = 0.0  # a zero vector stays zero
    gdn_check(x, **attrs)


@pytest.mark.parametrize("state", [False, True])
@pytest.mark.parametrize("final", [False, True])
def test_gated_delta_net_optional_state(state, final):
    gdn_check(gdn_case(rng(14), state=state, lengths=(1, 0, 5)), final=final)


def compare_updates(want, got, x, capacity, counts, lengths, widths):
    """state_update's captured prefix of each request (the rest is unspecified)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    for b, n in enumerate(counts):
        n = 0 if n is None else min(max(n, 0), capacity, lengths[b])
        offset = 0
        for width in widths:
            block = slice(offset, offset + n * width)
            np.testing.assert_allclose(got[b, block], want[b, block], rtol=2e-5, atol=2e-5)
            offset += capacity * width


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("per_key", [False, True])
@pytest.mark.parametrize("capacity,counts", [(1, [1, 0]), (3, [2, 9]), (8, [-1, 5])])
def test_gated_delta_net_state_update(rule, per_key, capacity, counts):
    lengths = (2, 4)
    x = gdn_case(rng(15), rule, per_key=per_key, lengths=lengths, qk_l2_norm=1)
    x["capture_count"] = np.array(counts, np.int32)
    want, got = gdn_run(x, update=True, update_rule=rule, state_update_capacity=capacity, qk_l2_norm=1)
    for w, g in zip(want[:2], got[:2]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    hq, hv, dk, dv = 2, 4, 4, 3
    decay_width = hv * dk if per_key and "decay" in x else hv
    compare_updates(want[2], got[2], x, capacity, counts, lengths, [decay_width, hq * dk, hv * dv])


@pytest.mark.parametrize("active", [0, 1])
def test_gated_delta_net_state_update_active(active):
    x = gdn_case(rng(16))
    x["capture_count"] = np.array([2, 2], np.int32)
    x["state_update_active"] = np.array([active], np.int32)
    want, got = gdn_run(x, update=True, state_update_capacity=2)
    for w, g in zip(want[:2], got[:2]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    if active:
        compare_updates(want[2], got[2], x, 2, [2, 2], (2, 4), [4, 8, 12])
    else:
        np.testing.assert_array_equal(got[2], want[2])  # zero-filled


def test_gated_delta_net_batched_layouts_without_state_and_with_updates():
    gdn_check(gdn_case(rng(40), layout="batched", ragged=False, state=False, lengths=(3, 3)))
    x = gdn_case(rng(41), layout="packed_batched", ragged=False, lengths=(3, 3))
    x["capture_count"] = np.array([2, 3], np.int32)
    want, got = gdn_run(x, update=True, state_update_capacity=3)
    compare_updates(want[2], got[2], x, 3, [2, 3], (3, 3), [4, 8, 12])


@pytest.mark.parametrize("elem", [F16, BF16])
def test_gated_delta_net_reduced_precision_state_update(elem):
    x = gdn_case(rng(42), elem=elem, per_key=True, gate="kda", bias_shape="flat")
    x["capture_count"] = np.array([2, 3], np.int32)
    want, got = gdn_run(x, elem=elem, update=True, state_update_capacity=3, gate_activation="kda")
    np.testing.assert_allclose(got[0].astype(np.float32), want[0].astype(np.float32),
                               rtol=2 * TOLERANCE[elem], atol=2 * TOLERANCE[elem])
    compare_updates(want[2], got[2], x, 3, [2, 3], (2, 4), [16, 8, 12])


def test_gated_delta_net_gate_inputs_without_decay():
    # onnxruntime accepts a_log and dt_bias with a rule that has no decay, and reads neither.
    gdn_check(gdn_case(rng(43), "linear", gate="softplus"), update_rule="linear", gate_activation="softplus")


def test_gated_delta_net_state_update_without_capacity():
    want, got = gdn_run(gdn_case(rng(17)), update=True)
    assert got[2].shape == want[2].shape == (2, 0)


def gdn_refused(x, match, **attrs):
    refused("GatedDeltaNet", gdn_inputs(x, F32, F32), [("output", F32), ("final_state", F32)], match,
            **attrs)


@pytest.mark.parametrize("gate_elem", [F16, BF16])
def test_gated_delta_net_refuses_gates_of_another_reduced_type(gate_elem):
    # onnxruntime: decay and beta are float32 or the query's type.
    x = gdn_case(rng(21), gate_elem=gate_elem)
    refused("GatedDeltaNet", gdn_inputs(x, F32, gate_elem), [("output", F32), ("final_state", F32)],
            "decay and beta must be float32 or the query's type float32")


def test_gated_delta_net_refuses_bad_attributes():
    x = gdn_case(rng(18))
    gdn_refused(x, "update_rule must be linear, gated, delta or gated_delta, got 'x'", update_rule="x")
    gdn_refused(x, "gate_activation must be none, softplus, qwen, sigmoid or kda, got 'relu'",
                gate_activation="relu")
    gdn_refused(x, "beta_activation must be none or sigmoid, got 'softplus'", beta_activation="softplus")
    gdn_refused(x, "state_update_capacity must be in \\[0, 8\\], got 9", state_update_capacity=9)


def test_gated_delta_net_refuses_inputs_the_rule_does_not_match():
    x = gdn_case(rng(19))
    gdn_refused(x, "update_rule 'linear' forbids decay and forbids beta", update_rule="linear")
    gdn_refused(dict(x, beta=None), "update_rule 'gated_delta' needs decay and needs beta")
    gdn_refused(x, "gate_activation softplus / sigmoid needs a_log and dt_bias", gate_activation="softplus")
    gdn_refused(gdn_case(rng(19), gate="softplus"), "a_log and dt_bias need gate_activation")
    gdn_refused(dict(x, capture_count=np.array([1, 1], np.int32)),
                "capture_count must be present exactly when state_update_capacity is positive")
    gdn_refused(x, "capture_count must be present exactly", state_update_capacity=2)


def test_gated_delta_net_refuses_bad_shapes():
    r = rng(20)
    x = gdn_case(r)
    gdn_refused(dict(x, value=None), "key and value must both be present or both be omitted")
    gdn_refused(dict(x, key=np.concatenate([x["key"]] * 2, axis=1)), "num_heads_q \\(2\\) must equal num_heads_k \\(4\\)")
    gdn_refused(dict(x, value=x["value"][:, :3], initial_state=None),
                "num_heads_v \\(3\\) must be a positive multiple of num_heads_q \\(2\\)")
    gdn_refused(dict(x, cu_seqlens=np.array([0, 2, 5], np.int32)), "cu_seqlens must start at 0 and end at total_tokens 6")
    gdn_refused(dict(x, cu_seqlens=np.array([0, 4, 2, 6], np.int32), initial_state=None),
                "cu_seqlens must be non-decreasing")
    gdn_refused(dict(x, cu_seqlens=None, initial_state=None), "initial_state is required to determine the batch")
    gdn_refused(dict(x, cu_seqlens=None, initial_state=value(r, (4, 4, 3, 4))),
                "total_tokens \\(6\\) must be a multiple of the batch 4")
    gdn_refused(dict(x, initial_state=value(r, (2, 4, 4, 3))), "initial_state .* must be \\[batch, num_heads_v")
    batched = gdn_case(r, layout="batched", ragged=False, lengths=(3, 3))
    gdn_refused(dict(batched, initial_state=batched["initial_state"][:1]),
                "initial_state .* must be \\[batch, num_heads_v")
    gdn_refused(dict(x, decay=value(r, (6, 2))), "decay .* must be \\[...tokens, num_heads_v\\]")
    gdn_refused(dict(x, beta=value(r, (6, 4, 1))), "beta .* must be \\[...tokens, num_heads_v\\]")
    packed = gdn_case(r, layout="packed")
    gdn_refused(dict(packed, initial_state=None), "initial_state is required for packed QKV")
    gdn_refused(dict(packed, initial_state=value(r, (2, 4, 3, 5))), "packed QKV query .* is not 2 \\* Hq \\* dk")
    batched = gdn_case(r, layout="batched", ragged=False, lengths=(3, 3))
    gdn_refused(dict(batched, cu_seqlens=np.array([0, 3, 6], np.int32)), "cu_seqlens describes ragged packing")
    soft = gdn_case(r, gate="softplus")
    gdn_refused(dict(soft, a_log=value(r, (3,))), "a_log .* must be \\[num_heads_v\\]", gate_activation="softplus")
    gdn_refused(dict(soft, dt_bias=value(r, (4, 4))), "dt_bias .* must be \\[num_heads_v\\] or",
                gate_activation="softplus")
    gdn_refused(dict(x, capture_count=np.array([1], np.int32)), "capture_count .* must be \\[batch\\] with batch 2",
                state_update_capacity=2)


# ---- malformed sizes: refused or run, never a crash or a hang ------------------------------------

def runs_or_refuses(op, inputs, outputs, **attrs):
    try:
        kiln.InferenceSession(model(op, inputs, outputs, **attrs)).run(None, feeds(inputs))
    except KILN_ERRORS:
        pass


def test_linear_attention_huge_head_count_without_values():
    r = rng(30)
    inputs = [("query", value(r, (1, 2, 4)), F32), ("key", value(r, (1, 2, 4)), F32),
              ("value", np.zeros((1, 2, 0), np.float32), F32)]
    runs_or_refuses("LinearAttention", inputs, [("output", F32), ("present_state", F32)],
                    update_rule="linear", q_num_heads=1, kv_num_heads=2**40)
    # (2^39 query heads) x (dv 2^30) is past int64: refused, though every input is empty.
    empty = [("query", np.zeros((0, 2, 2**40), np.float32), F32), ("key", np.zeros((0, 2, 2), np.float32), F32),
             ("value", np.zeros((0, 2, 2**30), np.float32), F32)]
    refused("LinearAttention", empty, [("output", F32), ("present_state", F32)], "output dim 2",
            update_rule="linear", q_num_heads=2**39, kv_num_heads=1)


@pytest.mark.parametrize("case", ["no batch", "no tokens", "huge heads", "no head size", "huge batch"])
def test_gated_delta_net_degenerate_sizes(case):
    r = rng(31)
    attrs = {}
    if case == "no batch":
        x = dict(query=value(r, (0, 3, 2, 4)), key=value(r, (0, 3, 2, 4)), value=value(r, (0, 3, 2, 3)),
                 decay=value(r, (0, 3, 2)), beta=value(r, (0, 3, 2)))
    elif case == "no tokens":
        x = dict(query=value(r, (0, 2, 4)), key=value(r, (0, 2, 4)), value=value(r, (0, 2, 3)),
                 cu_seqlens=np.zeros(3, np.int32), decay=value(r, (0, 2)), beta=value(r, (0, 2)),
                 capture_count=np.array([4, 4], np.int32))
        attrs = dict(state_update_capacity=4)
    elif case == "huge heads":
        x = dict(query=value(r, (2, 2**31, 0)), key=value(r, (2, 2**31, 0)),
                 value=np.zeros((2, 2**32, 0), np.float32), cu_seqlens=np.array([0, 2], np.int32),
                 capture_count=np.array([8], np.int32))
        attrs = dict(update_rule="linear", state_update_capacity=8)
    elif case == "huge batch":
        x = dict(query=value(r, (2**40, 0, 2, 4)), key=value(r, (2**40, 0, 2, 4)),
                 value=value(r, (2**40, 0, 2, 3)), decay=value(r, (2**40, 0, 2)), beta=value(r, (2**40, 0, 2)))
    else:
        x = dict(query=value(r, (2, 2, 0)), key=value(r, (2, 2, 0)), value=value(r, (2, 2, 3)),
                 cu_seqlens=np.array([0, 2], np.int32), decay=value(r, (2, 2)), beta=value(r, (2, 2)))
    runs_or_refuses("GatedDeltaNet", gdn_inputs(x, F32, F32),
                    [("output", F32), ("final_state", F32), ("state_update", F32)], **attrs)


def onnx_linear_attention(inputs, **attrs):
    """An ONNX (opset 27) LinearAttention node, which shares the recurrence and these checks."""
    graph_inputs = [helper.make_tensor_value_info(n, F32, a.shape) for n, a, _ in inputs]
    node = helper.make_node("LinearAttention", [n for n, _, _ in inputs], ["output", "present_state"],
                            name="LinearAttention_node", **attrs)
    outputs = [helper.make_tensor_value_info(n, F32, None) for n in ("output", "present_state")]
    graph = helper.make_graph([node], "la", graph_inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)]).SerializeToString()


@pytest.mark.parametrize("name,shape,match", [
    ("decay", (1, 3, 2), "decay .* must be \\(B, T, kv_num_heads or kv_num_heads \\* dk\\)"),
    ("decay", (2, 3), "decay .* must be \\(B, T,"),
    ("beta", (2, 1, 2), "beta .* must be \\(B, T, kv_num_heads or 1\\)")])
def test_onnx_linear_attention_refuses_gates_of_other_tokens(name, shape, match):
    r = rng(50)
    inputs = [("query", value(r, (2, 3, 8)), F32), ("key", value(r, (2, 3, 8)), F32),
              ("value", value(r, (2, 3, 6)), F32), ("past_state", value(r, (2, 2, 4, 3)), F32),
              ("decay", value(r, (2, 3, 2)), F32),
              ("beta", value(r, (2, 3, 2)), F32)]
    inputs = [(n, value(r, shape) if n == name else a, e) for n, a, e in inputs]
    m = onnx_linear_attention(inputs, q_num_heads=2, kv_num_heads=2)
    with pytest.raises(KILN_ERRORS, match=f"LinearAttention_node.*{match}"):
        kiln.InferenceSession(m).run(None, feeds(inputs))
