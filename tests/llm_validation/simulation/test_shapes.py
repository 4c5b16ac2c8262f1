"""Stage shapes: the parameters of all stages add up to the model's closed-form count; FLOPs
follow 2 N + 2 n_layer n d per token; the runtime's cut, the fractional cut beyond one block per
stage and the uniform cut."""

from __future__ import annotations

import dataclasses

import pytest

from llm_validation.config import ModelConfig, preset
from llm_validation.simulation.shapes import block_matrix_params, stage_shapes

#: Sums of floats over stages (fractional cuts): relative agreement with the exact totals.
SUM_RTOL = 1e-12


@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_parameters_add_up_to_the_model(K):
    tiny = preset("tiny")
    shapes = stage_shapes(tiny, K, seq_len=64)
    assert sum(s.params for s in shapes) == tiny.n_params()
    assert [s.layers for s in shapes] == [float(n) for n in ([4], [2, 2], [2, 1, 1], [1] * 4)[K - 1]]
    assert not any(s.fractional for s in shapes)


def test_a_tied_model_gets_a_head_of_its_own_on_the_last_stage():
    m = preset("smollm-135m")
    shapes = stage_shapes(m, 5, seq_len=128)
    assert sum(s.params for s in shapes) == m.n_params() + m.vocab_size * m.d_model


def test_flops_and_bytes_per_token():
    m = ModelConfig(name="t", vocab_size=100, n_layer=4, d_model=16, n_head=2, n_kv_head=1,
                    d_ff=32, max_seq_len=64)
    n = 8
    first, last = stage_shapes(m, 2, seq_len=n, activation_bytes=4)
    c, kv, f, V = 16, 8, 32, 100
    bm = 2 * c * c + 2 * c * kv + 3 * c * f
    assert block_matrix_params(m) == bm
    assert first.forward_flops_per_token == 2 * (2 * bm + 2 * n * c)
    assert last.forward_flops_per_token == 2 * (2 * bm + 2 * n * c) + 2 * V * c
    assert first.activation_bytes_per_token == 2 * (6 * c + 2 * kv + 3 * f) * 4
    assert last.activation_bytes_per_token == first.activation_bytes_per_token + 2 * c * 4 + V * 8
    assert first.message_bytes_per_token == c * 4 and last.message_bytes_per_token == 0
    assert first.matrix_params == last.matrix_params == 2 * bm


def test_uniform_cuts_keep_the_totals():
    m = preset("smollm-360m")
    exact = stage_shapes(m, 8, seq_len=256)
    for K, balance in [(8, "uniform"), (24, "uniform")]:
        shapes = stage_shapes(m, K, seq_len=256, balance=balance)
        assert all(s.fractional for s in shapes)
        for name in ("params", "forward_flops_per_token", "activation_bytes_per_token"):
            total = sum(getattr(s, name) for s in exact)
            assert sum(getattr(s, name) for s in shapes) == pytest.approx(total, rel=SUM_RTOL)
        if balance == "uniform":
            assert len({s.forward_flops_per_token for s in shapes}) == 1
    assert stage_shapes(m, 32, seq_len=256)[0].layers == 1.0


@pytest.mark.parametrize("balance", ["layers", "uniform"])
def test_stages_finer_than_one_block_are_refused(balance):
    """A 32-block model has at most 32 stages: a half block per stage needs tensor
    parallelism, which the cost model does not have."""
    with pytest.raises(ValueError, match="finer than one transformer block"):
        stage_shapes(preset("smollm-360m"), 33, seq_len=256, balance=balance)

@pytest.mark.parametrize("kw,match", [({"vstages": 0}, "vstages"), ({"seq_len": 0}, "seq_len"),
                                      ({"activation_bytes": 3}, "activation_bytes"),
                                      ({"balance": "flops"}, "balance")])
def test_bad_arguments(kw, match):
    args = {"vstages": 2, "seq_len": 16, **kw}
    with pytest.raises(ValueError, match=match):
        stage_shapes(preset("tiny"), args.pop("vstages"), **args)


def test_config_is_not_mutated():
    m = preset("tiny")
    before = dataclasses.asdict(m)
    stage_shapes(m, 3, seq_len=16, balance="uniform")
    assert dataclasses.asdict(m) == before
