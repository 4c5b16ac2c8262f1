"""The empirical predictor on synthetic horizons with a known answer."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from llm_validation.advice.horizon import fit_horizon

#: Least squares on exact data: round-off only.
EXACT = 1e-9


def test_exact_log_trend_is_recovered_with_zero_width():
    T = [100, 100, 200, 200, 400]
    g = [0.1 + 0.02 * math.log(t) for t in T]
    p = fit_horizon(T, g, 1600)
    assert p.estimate == pytest.approx(0.1 + 0.02 * math.log(1600), abs=EXACT)
    assert p.hi - p.lo == pytest.approx(0.0, abs=EXACT)
    assert p.detail["b"] == pytest.approx(0.02, abs=EXACT) and p.n == 5


def test_one_horizon_is_a_prediction_interval_of_the_mean():
    p = fit_horizon([200, 200, 200], [0.1, 0.2, 0.3], 5000)
    half = stats.t.ppf(0.975, 2) * 0.1 * math.sqrt(1 + 1 / 3)     # s = 0.1, n = 3
    assert p.estimate == pytest.approx(0.2, abs=EXACT)
    assert (p.lo, p.hi) == (pytest.approx(0.2 - half, abs=EXACT), pytest.approx(0.2 + half, abs=EXACT))
    assert p.detail["trend"].startswith("none")
    one = fit_horizon([200], [0.1], 400)
    assert one.estimate == 0.1 and one.lo == -math.inf and one.hi == math.inf


def test_noisy_trend_interval_widens_with_extrapolation():
    T = [100, 100, 100, 200, 200, 200]
    g = [0.10, 0.12, 0.11, 0.14, 0.16, 0.15]
    near, far = fit_horizon(T, g, 200), fit_horizon(T, g, 20000)
    assert far.hi - far.lo > 3 * (near.hi - near.lo)
    assert near.lo < 0.15 < near.hi


def test_bad_input():
    for args in (([], [], 10), ([0], [0.1], 10), ([10], [math.nan], 10), ([10], [0.1], 0)):
        with pytest.raises(ValueError):
            fit_horizon(*args)
