"""The compute-equivalent lag on hand-made frontiers with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from llm_validation.validation.envelope import envelope_lag, frontier

# a frontier exactly linear in log s: F(s) = 3 - 0.5 log2(s / 100)
STEPS = [100.0, 200.0, 400.0]
LOSSES = [3.0, 2.5, 2.0]


def test_on_the_points():
    assert envelope_lag(STEPS, LOSSES, 2.0).fraction == 0.0
    assert envelope_lag(STEPS, LOSSES, 2.5).fraction == pytest.approx(0.5)
    assert envelope_lag(STEPS, LOSSES, 3.0).fraction == pytest.approx(0.75)


def test_between_points_is_log_linear():
    lag = envelope_lag(STEPS, LOSSES, 2.25)
    assert lag.equivalent_steps == pytest.approx(100 * 2 ** 1.5)
    assert lag.gap == pytest.approx(0.25)
    assert lag.extrapolated is None


def test_extrapolation_both_ways():
    short = envelope_lag(STEPS, LOSSES, 3.5)
    assert short.extrapolated == "short"
    assert short.equivalent_steps == pytest.approx(50.0)
    long = envelope_lag(STEPS, LOSSES, 1.5)
    assert long.extrapolated == "long" and long.fraction == pytest.approx(-1.0)


def test_non_monotone_frontier_uses_the_running_minimum():
    x, f = frontier([400, 100, 200], [2.6, 3.0, 2.5])
    np.testing.assert_allclose(f, [3.0, 2.5, 2.5])
    # d between F(100) and F(200): the crossing is found on the first segment
    assert envelope_lag([100, 200, 400], [3.0, 2.5, 2.6], 2.75).equivalent_steps == \
        pytest.approx(100 * math.sqrt(2))


def test_flat_tail_is_flagged():
    lag = envelope_lag([100, 200], [2.0, 2.0], 1.9)
    assert lag.extrapolated == "long" and lag.fraction == -math.inf


@settings(max_examples=80, deadline=None)
@given(st.floats(1.5, 3.5), st.floats(1.5, 3.5))
def test_monotone_in_the_delayed_loss(a, b):
    la, lb = envelope_lag(STEPS, LOSSES, a), envelope_lag(STEPS, LOSSES, b)
    if a <= b:
        assert la.fraction <= lb.fraction + 1e-12
    else:
        assert lb.fraction <= la.fraction + 1e-12


def test_bad_input():
    with pytest.raises(ValueError, match=">= 2"):
        frontier([100], [2.0])
    with pytest.raises(ValueError, match="repeated"):
        frontier([100, 100], [2.0, 1.9])
    with pytest.raises(ValueError, match="not finite"):
        envelope_lag(STEPS, LOSSES, float("nan"))
