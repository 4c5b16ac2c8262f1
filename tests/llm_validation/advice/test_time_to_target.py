"""Time-to-target arithmetic against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from llm_validation.advice.time_to_target import (MIN_LAG_FRACTION, delayed_steps,
                                                  lag_fraction_from_gap, ratios_to_reference,
                                                  time_to_target)

#: Float round-off of a few divisions.
EXACT = 1e-12


def test_delayed_steps_and_time_by_hand():
    assert delayed_steps(1000, 0.0) == 1000
    assert delayed_steps(1000, 0.2) == pytest.approx(1250, abs=EXACT)     # 1000 / 0.8
    assert delayed_steps(1000, 0.5) == pytest.approx(2000, abs=EXACT)
    assert delayed_steps(1000, -0.25) == pytest.approx(800, abs=EXACT)    # ahead: 1000 / 1.25
    assert delayed_steps(1000, 1.0) == math.inf
    assert time_to_target(0.1, 1000, 0.2) == pytest.approx(125.0, abs=EXACT)
    assert time_to_target(0.125, 1000) == pytest.approx(125.0, abs=EXACT)
    for bad in ((0.0, 10, 0.0), (0.1, 0, 0.0), (0.1, 10, math.nan)):
        with pytest.raises(ValueError):
            time_to_target(*bad)


def test_ratios_by_hand():
    # 2BW steps 1.25x faster than 1F1B; lag 20% of the run -> exactly 1F1B's time (ratio 1)
    # lo: lag 10% -> 1/(0.9 * 1.25) = 0.8889; hi: lag 36% -> 1/(0.64 * 1.25) = 1.25
    r = ratios_to_reference({"1f1b": 0.125, "gpipe": 0.25, "2bw": 0.1}, 1000,
                            {"2bw": {"estimate": 0.2, "lo": 0.1, "hi": 0.36}})
    assert r["1f1b"] == {"time_s": pytest.approx(125.0), "ratio": 1.0}
    assert r["gpipe"]["ratio"] == pytest.approx(2.0, abs=EXACT)
    assert r["2bw"]["ratio"] == pytest.approx(1.0, abs=EXACT)
    assert r["2bw"]["ratio_lo"] == pytest.approx(1 / (0.9 * 1.25), abs=EXACT)
    assert r["2bw"]["ratio_hi"] == pytest.approx(1.25, abs=EXACT)
    assert r["2bw"]["time_s_hi"] == pytest.approx(156.25, abs=EXACT)
    with pytest.raises(ValueError, match="reference"):
        ratios_to_reference({"2bw": 0.1}, 1000, {})


def test_lag_fraction_from_gap_on_a_linear_curve():
    steps, vals = [0, 50, 100, 150, 200], [5.0, 4.0, 3.0, 2.0, 1.0]   # drop 4 over 200 steps
    assert lag_fraction_from_gap(steps, vals, 0.0) == pytest.approx(0.0, abs=EXACT)
    assert lag_fraction_from_gap(steps, vals, 0.25) == pytest.approx(0.25, abs=EXACT)
    assert lag_fraction_from_gap(steps, vals, 0.6) == pytest.approx(0.6, abs=EXACT)
    # no better than the first evaluation: censored, never reaches the target
    assert lag_fraction_from_gap(steps, vals, 1.0) == math.inf
    assert lag_fraction_from_gap(steps, vals, math.inf) == math.inf
    # ahead of the synchronous run: extrapolated along the last slope, clamped below
    assert lag_fraction_from_gap(steps, vals, -0.125) == pytest.approx(-0.125, abs=EXACT)
    assert lag_fraction_from_gap(steps, vals, -5.0) == MIN_LAG_FRACTION
    assert lag_fraction_from_gap(steps, vals, -math.inf) == MIN_LAG_FRACTION   # unbounded end
    with pytest.raises(ValueError, match="NaN"):
        lag_fraction_from_gap(steps, vals, math.nan)
