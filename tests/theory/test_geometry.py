"""Textbook checks of theory.geometry: dual-norm definition, LMO optimality, rho, Newton-Schulz."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from theory.geometry import (
    GEOMETRIES,
    L1,
    L2,
    LINF,
    SPECTRAL,
    get_geometry,
    newton_schulz,
    newton_schulz_inexactness,
)

#: float64 comparisons of quantities of size O(10): round-off is ~1e-15 relative.
FLOAT64_TOL = 1e-10
#: Newton-Schulz with Muon's coefficients does not converge to U V^T: its singular values land in
#: roughly [0.68, 1.12] after 5 steps (torch.optim.Muon docstring: "S'_ii ~ Uniform(0.5, 1.5)").
NS_SV_RANGE = (0.5, 1.5)


def _point(geom, seed, shape=(4, 3)):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    return x if geom.event_ndim == 2 else x.reshape(-1)


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
@given(seed=st.integers(0, 2**31 - 1))
def test_lmo_attains_dual_norm_and_is_feasible(name, seed):
    geom = GEOMETRIES[name]
    m = _point(geom, seed)
    d = geom.lmo(m)
    assert float(geom.norm(d)) <= 1 + FLOAT64_TOL
    assert float(geom.inner(m, d)) == pytest.approx(-float(geom.dual_norm(m)), rel=FLOAT64_TOL)


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
@given(seed=st.integers(0, 2**31 - 1))
def test_lmo_beats_random_feasible_points(name, seed):
    """<m, d(m)> <= <m, u> for every u in the unit ball (u drawn and rescaled into the ball)."""
    geom = GEOMETRIES[name]
    m = _point(geom, seed)
    d = geom.lmo(m)
    u = _point(geom, seed + 1)
    u = u / geom.norm(u)
    assert float(geom.inner(m, d)) <= float(geom.inner(m, u)) + FLOAT64_TOL


@pytest.mark.parametrize("name", sorted(GEOMETRIES))
@given(seed=st.integers(0, 2**31 - 1))
def test_hoelder_and_norm_equivalence(name, seed):
    geom = GEOMETRIES[name]
    g, u = _point(geom, seed), _point(geom, seed + 7)
    assert float(geom.inner(g, u)) <= float(geom.dual_norm(g) * geom.norm(u)) + FLOAT64_TOL
    rho = geom.rho(tuple(g.shape))
    assert float(geom.dual_norm(g)) <= rho * float(geom.l2(g)) * (1 + FLOAT64_TOL)


def test_textbook_values():
    x = torch.tensor([3.0, -4.0], dtype=torch.float64)
    assert float(L2.norm(x)) == 5.0
    assert float(LINF.norm(x)) == 4.0 and float(LINF.dual_norm(x)) == 7.0
    assert float(L1.norm(x)) == 7.0 and float(L1.dual_norm(x)) == 4.0
    assert torch.equal(LINF.lmo(x), torch.tensor([-1.0, 1.0], dtype=torch.float64))
    assert torch.equal(L1.lmo(x), torch.tensor([0.0, 1.0], dtype=torch.float64))
    a = torch.diag(torch.tensor([2.0, 0.5], dtype=torch.float64))
    assert float(SPECTRAL.norm(a)) == pytest.approx(2.0)
    assert float(SPECTRAL.dual_norm(a)) == pytest.approx(2.5)
    assert torch.allclose(SPECTRAL.lmo(a), -torch.eye(2, dtype=torch.float64))
    assert SPECTRAL.rho((3, 5)) == pytest.approx(math.sqrt(3))
    assert LINF.rho((9,)) == 3.0


def test_zero_input_gives_zero_lmo():
    for geom in GEOMETRIES.values():
        z = torch.zeros((3, 3) if geom.event_ndim == 2 else (5,), dtype=torch.float64)
        assert torch.count_nonzero(geom.lmo(z)) == 0


def test_spectral_lmo_rank_deficient():
    """Rank-1 m = s u v^T: the exact LMO is -u v^T (polar factor on the range), not a full rotation."""
    u = torch.tensor([[1.0], [0.0], [0.0]], dtype=torch.float64)
    v = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    m = 3.0 * u @ v
    d = SPECTRAL.lmo(m)
    assert torch.allclose(d, -(u @ v), atol=FLOAT64_TOL)
    assert float(SPECTRAL.inner(m, d)) == pytest.approx(-3.0)


def test_batched_matches_loop():
    x = torch.randn(5, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    batched = SPECTRAL.lmo(x)
    for i in range(5):
        assert torch.allclose(batched[i], SPECTRAL.lmo(x[i]), atol=FLOAT64_TOL)


def test_newton_schulz_matches_torch_muon_and_is_inexact():
    from torch.optim._muon import _zeropower_via_newtonschulz

    g = torch.randn(32, 16, generator=torch.Generator().manual_seed(1))
    ours = newton_schulz(g.bfloat16())
    theirs = _zeropower_via_newtonschulz(g, (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert torch.equal(ours, theirs)  # same fused ops in the same order: bitwise in bf16
    info = newton_schulz_inexactness(g.double())
    assert NS_SV_RANGE[0] < info["sv_min"] <= info["sv_max"] < NS_SV_RANGE[1]
    assert 0.0 < info["lmo_suboptimality"] < 0.5


def test_get_geometry_rejects_unknown():
    with pytest.raises(ValueError, match="geometry='l3'"):
        get_geometry("l3")
    assert get_geometry("spectral") is SPECTRAL


def test_numpy_is_not_silently_accepted():
    with pytest.raises(TypeError):
        L2.norm(np.ones(3))


def test_newton_schulz_batched_matches_single():
    g = torch.randn(2, 3, 8, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    batched = newton_schulz(g)
    assert batched.shape == g.shape
    assert torch.allclose(batched[1, 2], newton_schulz(g[1, 2]), atol=FLOAT64_TOL)
