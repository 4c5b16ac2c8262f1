"""The lag of a delayed run: textbook cases on piecewise-linear curves, censoring, monotonicity."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from llm_validation.validation.lag import lag

STEPS = [0, 100, 200, 300, 400]
VALS = [4.0, 3.0, 2.5, 2.2, 2.0]


def test_interior_crossing_is_linear_interpolation():
    # d = 2.35 lies halfway between 2.5 (step 200) and 2.2 (step 300): s* = 250, lag = 150.
    out = lag(STEPS, VALS, 2.35)
    assert out.steps == pytest.approx(150.0)
    assert out.fraction == pytest.approx(150 / 400)
    assert out.gap == pytest.approx(0.35)
    assert out.gap_fraction == pytest.approx(0.35 / 2.0)
    assert out.censored is None and not out.extrapolated


def test_equal_final_loss_has_zero_lag():
    assert lag(STEPS, VALS, 2.0).steps == pytest.approx(0.0)


def test_no_better_than_start_is_censored_above():
    out = lag(STEPS, VALS, 4.5)
    assert out.steps == 400 and out.censored == "above"


def test_below_sync_extrapolates_along_last_slope():
    # last two intervals: 2.5 -> 2.0 over 200 steps = 0.0025 per step; d = 1.95 -> lag -20.
    out = lag(STEPS, VALS, 1.95)
    assert out.steps == pytest.approx(-20.0) and out.extrapolated


def test_flat_tail_below_is_unbounded():
    out = lag([0, 1, 2, 3], [3.0, 2.0, 2.0, 2.0], 1.0)
    assert out.censored == "below" and math.isinf(out.steps)


def test_running_minimum_makes_a_noisy_curve_monotone():
    # the bump at step 200 (3.2) is ignored: the run had already reached 3.0 at step 100.
    out = lag([0, 100, 200, 300], [4.0, 3.0, 3.2, 2.0], 3.1)
    assert out.steps == pytest.approx(300 - 90.0)


@pytest.mark.parametrize("steps,vals,d", [([0], [1.0], 1.0), ([0, 0], [2.0, 1.0], 1.5),
                                          ([0, 1], [2.0, float("nan")], 1.5)])
def test_bad_input_is_refused(steps, vals, d):
    with pytest.raises(ValueError):
        lag(steps, vals, d)


@given(st.floats(1.9, 4.2), st.floats(1.9, 4.2))
def test_lag_is_monotone_in_the_delayed_loss(d1, d2):
    lo, hi = sorted((d1, d2))
    assert lag(STEPS, VALS, lo).steps <= lag(STEPS, VALS, hi).steps + 1e-9
