"""Horizon-ladder slopes: per-seed log-log fits, their interval, the regime, the crossing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llm_validation.claims.decide.ladder import (FLOOR_SLOPE, PAPER_GAP, crossing, fit_slope,
                                          per_seed_slopes, regime)
from llm_validation.validation.inference import Interval

HORIZONS = (200, 400, 800, 1600)


def _power_law(c: dict[int, float], b: dict[int, float]) -> dict[int, dict[int, float]]:
    return {h: {s: c[s] * h ** b[s] for s in c} for h in HORIZONS}


def test_exact_power_laws_give_their_slopes():
    vals = _power_law({0: 2.0, 1: 3.0, 2: 1.5}, {0: -0.5, 1: -0.4, 2: -0.6})
    fits, excluded = per_seed_slopes(vals)
    assert not excluded
    for s, b in {0: -0.5, 1: -0.4, 2: -0.6}.items():
        assert fits[s][0] == pytest.approx(b, abs=1e-12)
    fit = fit_slope(vals)
    assert fit.interval.estimate == pytest.approx(-0.5, abs=1e-12)
    assert fit.interval.n == 3 and fit.horizons == HORIZONS


def test_interval_is_over_seeds_not_seeds_times_horizons():
    rng = np.random.default_rng(0)
    vals = _power_law({s: 1.0 for s in range(4)}, {s: float(rng.normal(-0.3, 0.1))
                                                    for s in range(4)})
    fit = fit_slope(vals)
    assert fit.interval.n == 4            # one slope per seed, not 16 points


def test_non_positive_gap_excludes_the_seed():
    vals = _power_law({0: 1.0, 1: 1.0, 2: 1.0}, {0: -0.2, 1: -0.2, 2: -0.2})
    vals[800][1] = -0.01
    fit = fit_slope(vals)
    assert 1 in fit.excluded and set(fit.slopes) == {0, 2}


@pytest.mark.parametrize("lo,hi,want", [(-0.9, -0.5, "lag-like"), (-0.1, 0.2, "floor-like"),
                                        (0.5, 0.9, "growing"), (-0.6, 0.1, "undetermined")])
def test_regime(lo, hi, want):
    iv = Interval(estimate=(lo + hi) / 2, lo=lo, hi=hi, level=0.95, n=3, method="t")
    assert regime(iv)[0] == want
    assert FLOOR_SLOPE == pytest.approx(math.log2(1.25))


def test_crossing_of_an_exact_power_law():
    # gap = 0.2 (h / 200)^-0.5 reaches 0.01 at h = 200 * 20^2 = 80000 steps
    vals = {h: {s: 0.2 * (h / 200) ** -0.5 for s in range(3)} for h in HORIZONS}
    fit = fit_slope(vals)
    c = crossing(fit, vals, PAPER_GAP)
    assert c.steps == pytest.approx(80000, rel=1e-9)
    assert "extrapolation" in c.note


def test_no_crossing_when_the_gap_does_not_shrink():
    vals = {h: {s: 0.2 * (h / 200) ** (0.05 + 0.01 * s) for s in range(3)} for h in HORIZONS}
    c = crossing(fit_slope(vals), vals)
    assert math.isinf(c.steps)
