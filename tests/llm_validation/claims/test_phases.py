"""The extra-seeds phase's budget: cheapest claims first, shared runs counted once, the rest
reported with the seeds they would have run to."""

from __future__ import annotations

import pytest

from llm_validation.claims.plan.plan import build_plan
from llm_validation.claims.catalogue.registry import get_claims
from llm_validation.claims.plan.scales import get_scale
from llm_validation.claims.phases import Extension, within_budget

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


def _result(cid, *checks):
    from types import SimpleNamespace
    from llm_validation.validation.verdict import INCONCLUSIVE
    return SimpleNamespace(id=cid, status=INCONCLUSIVE, checks=checks, details=())


def test_extension_seeds_reads_every_seed_count_kind():
    """The extra-seeds phase extends a claim on any undecided check a seed count can decide
    (side, equivalence, group kinds, parts of aggregates), at the count the seeds-needed rule
    gives (the side check's second look on each kind's distance); a check whose measured effect
    sits on its boundary, or a divergence check, is reported and not extended."""
    from llm_validation.claims.decide.checks import aggregate, diff, make
    from llm_validation.claims.decide.sequential import DEFAULT_POLICY, second_look
    from llm_validation.claims.phases import extension_seeds

    # per-seed contrasts with mean 0.15 and sd 0.1: undecided at 3 seeds, decidable within 8
    a, b = {0: 0.35, 1: 0.45, 2: 0.55}, {0: 0.2, 1: 0.4, 2: 0.3}
    flat = {0: 0.1, 1: -0.1, 2: 0.0}  # mean exactly on 0
    side = diff("a - b > 0", "side", ("a", a), ("b", b), boundary=0.0, predicted="above")
    assert side.status == "inconclusive"
    run_to, need = second_look([0.15, 0.05, 0.25], 0.0, DEFAULT_POLICY)
    assert run_to is not None and 3 < run_to <= DEFAULT_POLICY.max_seeds
    eq = diff("a ~ b", "equivalence", ("a", a), ("b", b), width=0.3)  # |m| < w: inside
    grp = make("one sign", "same_sign", {"A": {0: 0.15, 1: 0.05, 2: 0.25}, "B": flat})
    grp_ok = make("one sign", "same_sign", {"A": {0: 0.15, 1: 0.05, 2: 0.25},
                                            "B": {0: 0.25, 1: 0.15, 2: 0.35}})
    div = make("div", "divergence", {"x": {0: 1.0, 1: 0.0, 2: 1.0}})
    nested = aggregate("every", "all", (side, diff("c", "side", ("f", flat),
                                                   ("z", dict.fromkeys(flat, 0.0)),
                                                   boundary=0.0, predicted="above")))
    exts = {e.claim_id: e for e in extension_seeds(
        [_result("side", side), _result("eq", eq), _result("grp", grp),
         _result("grp_ok", grp_ok), _result("div", div), _result("nested", nested)],
        DEFAULT_POLICY, 3)}
    assert exts["side"].seeds == run_to and exts["side"].needs == {"a - b > 0": need}
    assert eq.status == "inconclusive" and exts["eq"].seeds is not None
    assert exts["grp"].seeds is None and exts["grp"].needs == {"one sign": None}
    assert grp_ok.status == "inconclusive" and exts["grp_ok"].seeds is not None
    assert exts["div"].seeds is None and exts["div"].needs == {}
    assert exts["nested"].needs == {"a - b > 0": need, "c": None}
    assert exts["nested"].seeds == run_to
