"""com.microsoft LinearAttention and GatedDeltaNet against onnxruntime 1.32's CPU kernels, with the
helpers of test_contrib_llm_recent_ops.py: every update rule, head layout (grouped, inverse grouped,
fewer key heads), optional input and dtype onnxruntime's CPU kernel runs, on the same random
inputs; and bad inputs, checked by kiln's message. Keys are L2-normalized for the delta rules,
whose recurrence diverges without (as both ops' docs say)."""
import numpy as np
import pytest

from test_contrib_llm_recent_ops import F16, F32, check, refused, rng, value

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
            ("decay", decay.astype(decay.dtype) if gated else None, elem),
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
