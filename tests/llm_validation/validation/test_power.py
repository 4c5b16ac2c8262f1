"""Seeds needed for a decision: monotone, and the count reached has the power asked."""

from __future__ import annotations

import numpy as np
import pytest

from llm_validation.validation.power import MAX_SEEDS, seeds_needed
from llm_validation.validation.student import t_bounds

#: Simulations of the check that the answer has the power it claims (SE ~0.007 at 0.5).
SIMS = 5000
#: Allowed shortfall of the simulated power below the asked one: 4 Monte Carlo SEs.
POWER_TOL = 0.03


@pytest.mark.parametrize("power", [0.5, 0.8])
def test_the_count_has_the_power_and_one_fewer_does_not(power):
    delta, sd = 0.05, 0.06
    n = seeds_needed(delta, sd, power)
    rng = np.random.default_rng(11)

    def simulated(k):
        _, lo, _ = t_bounds(rng.normal(delta, sd, (SIMS, k)), 0.95)
        return float((lo > 0).mean())
    assert simulated(n) >= power - POWER_TOL
    assert simulated(n - 1) < power + POWER_TOL


def test_monotone_and_edge_cases():
    assert seeds_needed(0.1, 0.1, 0.8) <= seeds_needed(0.05, 0.1, 0.8)
    assert seeds_needed(0.0, 0.1, 0.5) is None
    assert seeds_needed(1.0, 0.0, 0.5) == 2
    assert seeds_needed(1e-4, 1.0, 0.8) is None and MAX_SEEDS == 1000
    with pytest.raises(ValueError):
        seeds_needed(0.1, 0.1, 1.5)
