"""Deciding "the event happens": exact bounds, the design's detection power, both errors
simulated at the least favourable rate."""

from __future__ import annotations

import numpy as np
import pytest

from llm_validation.validation.event_rate import event_rate, runs_to_refute
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS

ALPHA = 0.05
REPS = 20_000
MC_SLACK = 3 * np.sqrt(ALPHA * (1 - ALPHA) / REPS)


def test_runs_to_refute():
    assert runs_to_refute(0.5, 0.05) == 5          # 0.5^5 = 0.031 <= 0.05 < 0.5^4
    assert runs_to_refute(0.5, 0.05 / 64) == 11
    assert runs_to_refute(0.9, 0.05) == 2


def test_zero_events_decide_only_with_enough_runs():
    assert event_rate(0, 3, 0.5, ALPHA).status == INCONCLUSIVE
    assert "5 runs with no event" in event_rate(0, 3, 0.5, ALPHA).reason
    assert event_rate(0, 6, 0.5, ALPHA).status == FAIL
    assert event_rate(0, 6, 0.5, ALPHA / 64).status == INCONCLUSIVE


def test_zero_events_bound_is_the_rule_of_three():
    r = event_rate(0, 100, 0.5, ALPHA)
    assert r.hi == pytest.approx(1 - ALPHA ** (1 / 100))
    assert r.hi == pytest.approx(3 / 100, rel=0.02)   # an approximation


def test_all_events_pass():
    assert event_rate(6, 6, 0.5, ALPHA).status == PASS
    assert event_rate(3, 3, 0.5, ALPHA).status == INCONCLUSIVE


@pytest.mark.parametrize("runs", [3, 6, 10])
def test_errors_at_the_boundary_rate(runs):
    rng = np.random.default_rng(runs)
    events = rng.binomial(runs, 0.5, size=REPS)
    statuses = [event_rate(int(e), runs, 0.5, ALPHA).status for e in events]
    # the true rate is exactly p_min: 'fail' is an error (rate >= p_min), and so would be a
    # 'pass' at any rate just below p_min; both must stay under alpha
    assert np.mean([s == FAIL for s in statuses]) <= ALPHA + MC_SLACK
    assert np.mean([s == PASS for s in statuses]) <= ALPHA + MC_SLACK


def test_bad_input():
    with pytest.raises(ValueError):
        event_rate(4, 3, 0.5, ALPHA)
    with pytest.raises(ValueError):
        event_rate(0, 3, 1.0, ALPHA)
