"""The Llama-style model: shapes, causality, GQA/RoPE against explicit formulas, stage split."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from llm_validation.training.model import (
    Rotary,
    Transformer,
    boundary_cuts,
    lm_loss,
    param_kind,
    stage_activation_dtype,
    stage_bounds,
)
from tests.llm_validation.helpers import MICRO

#: float32 agreement between two mathematically equal attention computations (different
#: summation order): a few ulps of values of order 1.
ATOL_REORDER = 1e-5


def _idx(b=2, t=12, seed=0):
    return torch.randint(0, 256, (b, t), generator=torch.Generator().manual_seed(seed))


def test_shapes_and_loss():
    model = Transformer(MICRO)
    idx = _idx()
    logits = model(idx)
    assert logits.shape == (2, 12, 256)
    loss = lm_loss(logits, idx)
    assert loss.ndim == 0
    # at initialisation the prediction is close to uniform: loss near log(V)
    assert abs(loss.item() - math.log(256)) < 0.1


def test_same_seed_same_weights_and_different_seed_differs():
    a, b, c = Transformer(MICRO, seed=3), Transformer(MICRO, seed=3), Transformer(MICRO, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.embed.weight, c.embed.weight)


def test_causal_future_tokens_do_not_change_the_past():
    model = Transformer(MICRO)
    idx = _idx()
    changed = idx.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 256
    with torch.no_grad():
        a, b = model(idx), model(changed)
    assert torch.equal(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])


def test_attention_matches_explicit_gqa_softmax():
    model = Transformer(MICRO)
    attn, rope = model.blocks[0].attn, model.rope
    x = torch.randn(2, 10, MICRO.d_model, generator=torch.Generator().manual_seed(1))
    h, k_h, d = MICRO.n_head, MICRO.n_kv_head, MICRO.head_dim
    q = rope(attn.q(x).view(2, 10, h, d).transpose(1, 2))
    k = rope(attn.k(x).view(2, 10, k_h, d).transpose(1, 2)).repeat_interleave(h // k_h, dim=1)
    v = attn.v(x).view(2, 10, k_h, d).transpose(1, 2).repeat_interleave(h // k_h, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(10, 10).triu(1).bool(), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 10, h * d)
    with torch.no_grad():
        assert torch.allclose(attn(x, rope), attn.o(y), atol=ATOL_REORDER)


def test_rope_scores_depend_only_on_relative_position():
    rope = Rotary(8, 64, 10000.0)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=gen), torch.randn(8, generator=gen)

    def score(i, j):
        qs = rope(q.expand(1, 1, 64, 8).contiguous())[0, 0, i]
        ks = rope(k.expand(1, 1, 64, 8).contiguous())[0, 0, j]
        return float(qs @ ks)

    assert score(5, 2) == pytest.approx(score(40, 37), abs=ATOL_REORDER)
    assert score(0, 0) == pytest.approx(float(q @ k), abs=ATOL_REORDER)  # no rotation at 0


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_split_composes_to_forward_bitwise_and_shares_parameters(stages):
    model = Transformer(MICRO)
    parts = model.split(stages)
    idx = _idx()
    h = idx
    for part in parts:
        h = part(h)
    assert torch.equal(h, model(idx))
    ids = [id(p) for part in parts for p in part.parameters()]
    assert len(ids) == len(set(ids))                               # each parameter once
    assert set(ids) == {id(p) for p in model.parameters()}         # the model's own objects
    assert parts[0].embed is model.embed and parts[-1].norm is model.norm


def test_split_gradients_equal_full_model_gradients_bitwise():
    full, split = Transformer(MICRO), Transformer(MICRO)
    idx = _idx()
    lm_loss(full(idx), idx).backward()
    h = idx
    for part in split.split(3):
        h = part(h)
    lm_loss(h, idx).backward()
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(full.parameters(), split.parameters()))


def test_stage_shapes():
    first, middle, last = Transformer(MICRO).split(3)
    idx = _idx()
    h = first(idx)
    assert h.shape == (2, 12, MICRO.d_model)
    assert middle(h).shape == h.shape
    assert last(h).shape == (2, 12, 256)


def test_tied_head():
    tied = dataclasses.replace(MICRO, tied=True)
    model = Transformer(tied)
    assert model.head is None and model.head_weight is model.embed.weight
    assert model.num_params() == tied.n_params()
    (only,) = model.split(1)
    assert torch.equal(only(_idx()), model(_idx()))
    with pytest.raises(ValueError, match="tied"):
        model.split(2)


def test_stage_bounds_and_param_kinds():
    assert stage_bounds(5, 2) == [(0, 3), (3, 5)]
    assert stage_bounds(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(ValueError):
        stage_bounds(3, 4)
    kinds = {param_kind(n, p) for n, p in Transformer(MICRO).named_parameters()}
    assert kinds == {"matrix", "embed", "head", "norm"}


# ------------------------------------------------------------- compute-dtype stage boundaries
def _bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _pipelined_grads(model: Transformer, stages: int, idx: torch.Tensor):
    """Stage by stage as the pipeline runs them: each stage's input a fresh leaf (the received
    activation), the backward chained through the leaves' gradients (the sent gradients).
    Returns (logits, the boundary activations, the parameter gradients)."""
    parts, outs, ins = model.split(stages), [], []
    h = idx
    with _bf16():
        for part in parts:
            if part.is_first:
                out = part(h)
            else:
                h = h.detach().requires_grad_(True)
                ins.append(h)
                out = part(h)
            outs.append(out)
            h = out
        loss = lm_loss(h, idx)
    loss.backward()
    for k in range(len(parts) - 2, -1, -1):
        torch.autograd.backward(outs[k], ins[k].grad)
    return h, outs[:-1], [p.grad for p in model.parameters()]


def test_boundary_cuts_follow_the_split():
    four = dataclasses.replace(MICRO, n_layer=4)
    assert boundary_cuts(four) == frozenset()
    assert boundary_cuts(dataclasses.replace(four, boundary_dtype="compute")) == frozenset()
    assert boundary_cuts(dataclasses.replace(four, boundary_dtype="compute",
                                             boundary_stages=2)) == {2}
    assert boundary_cuts(dataclasses.replace(four, boundary_dtype="compute",
                                             boundary_stages=3)) == {2, 3}
    assert stage_activation_dtype(four, "bfloat16", torch.float32) == torch.float32
    on = dataclasses.replace(four, boundary_dtype="compute", boundary_stages=2)
    assert stage_activation_dtype(on, "bfloat16", torch.float32) == torch.bfloat16
    assert stage_activation_dtype(on, "float32", torch.float32) == torch.float32
    for bad, match in (({"boundary_dtype": "bf16"}, "boundary_dtype"),
                       ({"boundary_dtype": "compute", "boundary_stages": 5}, "boundary_stages"),
                       ({"boundary_stages": 2}, "needs boundary_dtype")):
        with pytest.raises(ValueError, match=match):
            dataclasses.replace(four, **bad)


def test_compute_boundaries_round_in_the_model_and_split_bitwise():
    """Under bf16 autocast the full model (the emulator) rounds the stream at the cuts; the
    stages, run as separate leaves as the pipeline runs them, send bf16 and give the same
    logits and parameter gradients bitwise. The rounding is real (float32 boundaries give
    other numbers) and a no-op without autocast."""
    cfg = dataclasses.replace(MICRO, boundary_dtype="compute", boundary_stages=3)
    idx = _idx()
    full = Transformer(cfg)
    with _bf16():
        logits = full(idx)
        loss = lm_loss(logits, idx)
    loss.backward()
    logits_p, sent, grads_p = _pipelined_grads(Transformer(cfg), 3, idx)
    assert all(h.dtype == torch.bfloat16 for h in sent) and len(sent) == 2
    assert torch.equal(logits, logits_p)
    assert all(torch.equal(p.grad, g) for p, g in zip(full.parameters(), grads_p))
    plain = Transformer(MICRO)                                      # float32 boundaries
    with _bf16():
        plain_logits = plain(idx)
    assert not torch.equal(plain_logits, logits)
    assert torch.equal(Transformer(cfg)(idx), Transformer(MICRO)(idx))   # float32 run: no-op
    (one,) = Transformer(cfg).split(1)         # one stage (data-parallel emulation): the cuts
    with _bf16():                              # inside it still round
        assert torch.equal(one(idx), logits)
