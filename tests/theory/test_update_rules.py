"""The update rules of THEORY.md, checked against hand-computed values and the EF identity."""

from __future__ import annotations

import pytest
import torch

from theory.update_rules import (
    ef_correct,
    ema_momentum,
    grad_ef_mix,
    lmo_step,
    read_index,
)


def test_read_index_clamps_at_zero():
    assert [read_index(k, 1) for k in range(4)] == [0, 0, 1, 2]
    assert [read_index(k, 0) for k in range(3)] == [0, 1, 2]
    assert [read_index(k, 3) for k in range(5)] == [0, 0, 0, 0, 1]
    with pytest.raises(ValueError):
        read_index(0, -1)


def test_ema_momentum_first_step_is_gradient():
    g = torch.tensor([2.0, -4.0])
    m0 = ema_momentum(None, g, 0.1)
    assert torch.equal(m0, g) and m0 is not g
    assert torch.allclose(ema_momentum(m0, torch.zeros(2), 0.25), 0.75 * g)


def test_lmo_step_and_ef_virtual_iterate_identity():
    """z_k = x_k - lam v_{k-1} satisfies z_{k+1} = z_k + v_k exactly (THEORY.md result 5)."""
    gen = torch.Generator().manual_seed(0)
    lam, eta, beta = 0.7, 0.1, 0.05
    x = torch.randn(6, dtype=torch.float64, generator=gen)
    v_prev = torch.zeros_like(x)
    for _ in range(10):
        d = torch.sign(torch.randn(6, dtype=torch.float64, generator=gen))
        x_base = lmo_step(x, d, eta, beta)
        v = x_base - x
        x_next = ef_correct(x_base, v, v_prev, lam)
        z, z_next = x - lam * v_prev, x_next - lam * v
        assert torch.allclose(z_next, z + v, atol=1e-14)
        x, v_prev = x_next, v


def test_grad_ef_mix():
    g, gp = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.0])
    assert torch.equal(grad_ef_mix(g, None, 1.0), g)
    assert torch.allclose(grad_ef_mix(g, gp, 1.0), 2 * g - gp)
