"""The extra-seeds stage's budget: cheapest claims first, shared runs counted once, the rest
reported with the seeds they would have run to."""

from __future__ import annotations

import pytest

from llm_validation.claims.plan import build_plan
from llm_validation.claims.registry import get_claims
from llm_validation.claims.scales import get_scale
from llm_validation.claims.stages import Extension, within_budget

IDS = ("adamw-vs-muon", "dcasgd")


def _plans():
    claims, scale = get_claims(IDS), get_scale("tiny")

    def plan_for(chosen):
        return build_plan(claims, scale, seeds=(0, 1, 2), claim_seeds=chosen)
    return plan_for({}), plan_for


def _added(base, plan):
    have = {r.name for r in base.available()}
    return sum(r.cost_s for r in plan.available() if r.name not in have)


def test_within_budget_takes_the_cheapest_first():
    base, plan_for = _plans()
    exts = [Extension(i, 5, {"check": 5}) for i in IDS] + [Extension("beta2", None, {"c": None})]
    alone = {i: _added(base, plan_for({i: tuple(range(5))})) for i in IDS}
    both = _added(base, plan_for({i: tuple(range(5)) for i in IDS}))
    assert all(v > 0 for v in alone.values()) and both <= sum(alone.values()) + 1e-9
    cheap, dear = sorted(IDS, key=alone.get)

    none = within_budget(exts, base, plan_for, 0.0)
    assert [e.seeds for e in none] == [None, None, None]
    assert {e.claim_id: e.over_budget for e in none} == {IDS[0]: 5, IDS[1]: 5, "beta2": None}

    one = {e.claim_id: e for e in within_budget(exts, base, plan_for, alone[cheap])}
    assert one[cheap].seeds == 5 and one[cheap].cost_s == pytest.approx(alone[cheap])
    assert one[dear].seeds is None and one[dear].over_budget == 5

    every = within_budget(exts, base, plan_for, both)
    assert [e.seeds for e in every] == [5, 5, None]
    assert sum(e.cost_s for e in every if e.seeds) == pytest.approx(both)
    assert every[2].to_dict()["needs"] == {"c": None}
