"""The empirical predictor on synthetic horizons with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from llm_validation.advice.horizon import ADDITIVE, TREND, fit_horizon

#: Least squares on exact data: round-off only.
EXACT = 1e-9


def test_exact_power_law_is_recovered_with_zero_width():
    T = [100, 100, 200, 200, 400]
    g = [0.9 * t ** -0.5 for t in T]                 # a lag-like gap: halves per 4x horizon
    p = fit_horizon(T, g, 1600)
    assert p.detail["trend"] == TREND
    assert p.estimate == pytest.approx(0.9 * 1600 ** -0.5, abs=EXACT)
    assert p.hi - p.lo == pytest.approx(0.0, abs=EXACT)
    assert p.detail["b"] == pytest.approx(-0.5, abs=EXACT) and p.n == 5


def test_a_shrinking_gap_is_never_extrapolated_below_zero():
    """The tiny ledger's Muon pairs fall ~0.91 per log-log unit: a line in g (the old trend)
    crossed zero and predicted -5.3% at 15,259 steps; the power law stays positive."""
    T = [100, 100, 200, 200, 400, 800, 1600]
    g = [0.063, 0.060, 0.056, 0.052, 0.030, 0.013, 0.0088]
    p = fit_horizon(T, g, 15259)
    assert 0 < p.lo <= p.estimate <= p.hi < 0.0088
    line = np.polyfit(np.log(T), g, 1)                # what the additive trend would say
    assert np.polyval(line, math.log(15259)) < 0


def test_a_non_positive_pair_falls_back_to_the_additive_line_and_says_so():
    T = [100, 200, 400, 800]
    g = [0.03 - 0.01 * math.log2(t / 100) for t in T]    # exact line in log T, reaching 0
    p = fit_horizon(T, g, 1600)
    assert p.detail["trend"].startswith(ADDITIVE) and "g <= 0" in p.detail["trend"]
    assert p.estimate == pytest.approx(-0.01, abs=EXACT)
    assert p.hi - p.lo == pytest.approx(0.0, abs=EXACT)


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


#: Coverage simulation: replications, and the tolerance on the 95% rate (3.5 binomial standard
#: errors at 2000 draws: sqrt(0.95 * 0.05 / 2000) = 0.0049, so a false alarm is ~1 in 4000).
COVERAGE_REPS, COVERAGE_TOL = 2000, 0.017


def test_the_power_law_interval_covers_a_new_pair_95_percent_of_the_time():
    """The ladder's design (5 horizons x 3 seeds) with log-normal scatter around a power law:
    the 95% prediction interval at 8x the top horizon holds a fresh pair at its stated rate.
    (The previous trend, a line in g, covers ~10% of fresh pairs on this design.)"""
    rng = np.random.default_rng(20261124)
    T = np.repeat([100.0, 200.0, 400.0, 800.0, 1600.0], 3)
    target, b, sd = 12800.0, -0.9, 0.3
    hits = 0
    for _ in range(COVERAGE_REPS):
        g = 0.5 * T ** b * np.exp(sd * rng.standard_normal(T.size))
        p = fit_horizon(T, g, target)
        fresh = 0.5 * target ** b * math.exp(sd * rng.standard_normal())
        hits += p.lo <= fresh <= p.hi
    assert abs(hits / COVERAGE_REPS - 0.95) < COVERAGE_TOL
