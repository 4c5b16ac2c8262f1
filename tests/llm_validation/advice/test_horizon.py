"""The empirical predictor on synthetic horizons with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from llm_validation.advice.horizon import ADDITIVE, MIN_TREND_SPREAD, TREND, fit_horizon
from llm_validation.advice.transfer import Target, law_steps, law_tokens_per_param

#: Least squares on exact data: round-off only.
EXACT = 1e-9


class _Pair:
    """A pilot pair as the laws read it: horizon, gap fraction, tokens per parameter."""

    def __init__(self, horizon: int, gap_fraction: float, n_params: float = 1e5,
                 tokens_per_step: int = 64) -> None:
        self.horizon, self.gap_fraction = horizon, gap_fraction
        self.tokens_per_param = horizon * tokens_per_step / n_params

    def value(self, quantity: str) -> float:
        return self.gap_fraction


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
    inside = fit_horizon(T, g, 566)                     # inside the pilot's horizons: the line
    assert inside.detail["trend"].startswith(ADDITIVE) and "g <= 0" in inside.detail["trend"]
    assert inside.estimate == pytest.approx(0.03 - 0.01 * math.log2(5.66), abs=EXACT)
    assert inside.hi - inside.lo == pytest.approx(0.0, abs=EXACT)
    # beyond them the line would cross zero (-0.01 at 1600): it is held at the longest horizon
    p = fit_horizon(T, g, 1600)
    assert p.estimate == pytest.approx(0.0, abs=EXACT)
    assert "not extrapolated: read at the pilot's longest horizon, 800 steps" in p.detail["trend"]
    short = fit_horizon(T, g, 50)
    assert short.estimate == pytest.approx(0.03, abs=EXACT) and "shortest" in short.detail["trend"]


def test_one_horizon_is_a_prediction_interval_on_the_log_scale():
    """Positive fractions at one horizon: the prediction interval of one more pair of log g,
    back on the g scale (the geometric mean, both ends positive)."""
    g = [0.1, 0.2, 0.3]
    p = fit_horizon([200, 200, 200], g, 5000)
    logs = np.log(g)
    half = stats.t.ppf(0.975, 2) * logs.std(ddof=1) * math.sqrt(1 + 1 / 3)
    assert p.estimate == pytest.approx(math.exp(logs.mean()), abs=EXACT)
    assert (p.lo, p.hi) == (pytest.approx(math.exp(logs.mean() - half), abs=EXACT),
                            pytest.approx(math.exp(logs.mean() + half), abs=EXACT))
    assert p.detail["trend"].startswith("none (one horizon): log g") and p.detail["scale"] == "log"
    one = fit_horizon([200], [0.1], 400)
    assert one.estimate == pytest.approx(0.1, abs=EXACT) and one.lo == 0.0 and one.hi == math.inf


def test_a_log_fitted_law_never_prints_a_negative_end():
    """The user's case: three pairs at one horizon whose mean +- t s sqrt(1 + 1/n) in g
    reached below zero (0.0846 [-0.0339, 0.203]); on the log scale both ends are positive, and
    the formula printed is the fit made."""
    g = [0.04, 0.08, 0.134]
    m, s = float(np.mean(g)), float(np.std(g, ddof=1))
    assert m - stats.t.ppf(0.975, 2) * s * math.sqrt(4 / 3) < 0      # the old interval's end
    for law in (law_steps, law_tokens_per_param):
        p = law([_Pair(200, x) for x in g], Target(steps=5000, tokens_per_step=64,
                                                   n_params=1e5))
        assert 0 < p.lo < p.estimate < p.hi
        assert p.detail["formula"].startswith("none (one horizon): log g")


def test_one_horizon_with_a_non_positive_fraction_stays_additive_and_says_so():
    p = fit_horizon([200, 200, 200], [-0.01, 0.02, 0.05], 5000)
    half = stats.t.ppf(0.975, 2) * 0.03 * math.sqrt(1 + 1 / 3)
    assert p.estimate == pytest.approx(0.02, abs=EXACT) and p.detail["scale"] == "g"
    assert p.lo == pytest.approx(0.02 - half, abs=EXACT) and "g <= 0" in p.detail["trend"]


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


def test_horizons_spanning_less_than_the_trend_spread_are_one_horizon():
    """Mutation of the spread rule: 1000 and 1100 steps (1.1x) give the one-horizon constant,
    1000 and 1000 x MIN_TREND_SPREAD a power law that recovers the true slope."""
    g = [0.02, 0.02 * 1.1 ** -1.0]
    p = fit_horizon([1000, 1100], g, 10_000)
    assert p.detail["trend"].startswith("none (one horizon: they span only 1.1x")
    assert p.estimate == pytest.approx(math.exp(np.mean(np.log(g))), rel=1e-12)
    T2 = 1000 * MIN_TREND_SPREAD
    p = fit_horizon([1000, T2], [0.02, 0.02 * MIN_TREND_SPREAD ** -1.0], 10_000)
    assert p.detail["trend"] == TREND and p.estimate == pytest.approx(0.02 / 10, rel=1e-9)
