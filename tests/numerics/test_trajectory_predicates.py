"""Every numeric proof predicate of theory.predicates holds (slack >= -TOL) on REAL trajectories
of the batched simulator, for generated problems and parameters."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numerics.problems import make_problem
from numerics.trajectory_checks import SCENARIOS, scenario_slacks
from tests.numerics.strategies import SIZE, draws
from theory.predicates import PREDICATES
from theory.proof import TOL

#: Steps per run (the states of every step are kept, so runs are short).
STEPS = 40
#: Seeds per stochastic configuration (the two expectation predicates average over them).
SEEDS = 6


def test_every_predicate_is_evaluated_on_trajectories():
    assert {n for s in SCENARIOS.values() for n in s.predicates} == set(PREDICATES)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), ds=st.lists(draws, min_size=1, max_size=3))
def test_predicates_hold_on_real_trajectories(scenario, data, ds):
    sc = SCENARIOS[scenario]
    families = [f for f in SIZE if f != "matrix_ls" or "spectral" in sc.geometries]
    families = [f for f in families if (f != "quadratic_linf" or "linf" in sc.geometries)]
    family = data.draw(st.sampled_from(families), label="family")
    p = make_problem(family, data.draw(st.integers(*SIZE[family]), label="size"),
                     data.draw(st.integers(0, 1000), label="problem_seed"))
    cfgs = [sc.build(p, d) for d in ds]
    slacks = scenario_slacks(scenario, p, cfgs, STEPS, seeds=SEEDS)
    assert slacks, "no predicate applied"
    bad = {k: v for k, v in slacks.items() if not v >= -TOL}
    assert not bad, bad
