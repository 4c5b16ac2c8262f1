"""Edge values of the stable float evaluation (theory.numeric): (1 - x)**n at x = 1."""

from __future__ import annotations

import pytest

from theory import THEOREMS


def test_momentum_error_at_alpha_one_is_exact():
    """alpha = 1 is in the domain; (1 - alpha)**k must be 1 at k = 0 and 0 after (numerics'
    verify found `math.log1p(-1)` raising here)."""
    t = THEOREMS["momentum_error"]
    common = dict(L=1, eta=0.25, alpha=1, rho=1, s=1, omega_bar=0)
    assert t.evaluate(k=0, sigma=0.5, **common) == pytest.approx(0.5 + 0.5)  # (1-a)^0 rs + sqrt(a) rs
    assert t.evaluate(k=3, sigma=0.5, **common) == pytest.approx(0.5)
    assert t.evaluate(k=0, sigma=0, **common) == 0.0


def test_stable_form_matches_sympy_away_from_the_edge():
    t = THEOREMS["star_convex_delayed"]
    vals = dict(K=1000, L=1, eta=0.01, alpha=0.1, beta=0.005, sigma=0, rho=1, tau=1, r0=1)
    exact = float(t.bound.subs({t.parameters[k]: v for k, v in vals.items()}).evalf(30))
    assert t.evaluate(**vals) == pytest.approx(exact, rel=1e-12)
