"""A small GPT-2-style decoder with an explicit KV cache, written as GPT-2's original code exports.

Inputs: input_ids and position_ids [batch, seq], attention_mask [batch, past_seq + seq], and per
layer `past_<i>` [2, batch, heads, past_seq, head_dim] (keys then values, the layout onnxruntime's
gpt2 transformer optimizer looks for); outputs: logits [batch, seq, vocab] and `present_<i>`, the
past with this call's keys and values appended. A run with past_seq 0 is the prompt; feeding the
presents back with one new token is a generation step.
"""
import math

import torch
import torch.nn as nn

VOCAB, POSITIONS, HIDDEN, HEADS, LAYERS = 100, 64, 64, 4, 2
HEAD_DIM = HIDDEN // HEADS


def gelu_tanh(x):
    """GPT-2's gelu (the tanh approximation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.register_buffer("bias", torch.tril(torch.ones(POSITIONS, POSITIONS)).view(1, 1, POSITIONS, POSITIONS))

    @staticmethod
    def split_heads(x):
        return x.view(x.size(0), x.size(1), HEADS, HEAD_DIM).permute(0, 2, 1, 3)

    def forward(self, x, past, additive_mask):
        query, key, value = self.c_attn(x).split(HIDDEN, dim=2)
        query, key, value = self.split_heads(query), self.split_heads(key), self.split_heads(value)
        key = torch.cat((past[0], key), dim=-2)
        value = torch.cat((past[1], value), dim=-2)
        present = torch.stack((key, value))
        w = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        nd, ns = w.size(-2), w.size(-1)
        causal = self.bias[:, :, ns - nd:ns, :ns]
        w = w * causal - 1e4 * (1 - causal) + additive_mask
        a = torch.matmul(nn.functional.softmax(w, dim=-1), value)
        a = a.permute(0, 2, 1, 3).contiguous().view(x.size(0), x.size(1), HIDDEN)
        return self.c_proj(a), present


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.c_fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.c_proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, past, additive_mask):
        a, present = self.attn(self.ln_1(x), past, additive_mask)
        x = x + a
        x = x + self.c_proj(gelu_tanh(self.c_fc(self.ln_2(x))))
        return x, present


class Gpt2Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(POSITIONS, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids, position_ids, attention_mask, *pasts):
        x = self.wte(input_ids) + self.wpe(position_ids)
        additive_mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        presents = []
        for block, past in zip(self.blocks, pasts):
            x, present = block(x, past, additive_mask)
            presents.append(present)
        logits = torch.matmul(self.ln_f(x), self.wte.weight.t())
        return (logits, *presents)


def export_args(batch=2, seq=3, past_seq=5):
    """Example inputs for the export: a step past a few cached positions."""
    input_ids = torch.randint(0, VOCAB, (batch, seq))
    position_ids = torch.arange(past_seq, past_seq + seq).expand(batch, seq).contiguous()
    attention_mask = torch.ones(batch, past_seq + seq, dtype=torch.int64)
    pasts = tuple(torch.randn(2, batch, HEADS, past_seq, HEAD_DIM) for _ in range(LAYERS))
    return (input_ids, position_ids, attention_mask, *pasts)


def names_and_axes():
    pasts = [f"past_{i}" for i in range(LAYERS)]
    presents = [f"present_{i}" for i in range(LAYERS)]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "position_ids": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "total_seq"}, "logits": {0: "batch", 1: "seq"}}
    axes.update({name: {1: "batch", 3: "past_seq"} for name in pasts})
    axes.update({name: {1: "batch", 3: "total_seq"} for name in presents})
    return ["input_ids", "position_ids", "attention_mask", *pasts], ["logits", *presents], axes
