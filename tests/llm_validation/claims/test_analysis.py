"""Every claim's analysis passes on synthetic runs built to pass and fails on runs built to fail
(so every verdict can fail), and is inconclusive without runs or with one seed."""

from __future__ import annotations

import pytest

from llm_validation.claims.analysis import analyse
from llm_validation.claims.data import ClaimData
from llm_validation.claims.registry import CLAIMS
from tests.llm_validation.claims.synthetic import DIVERGED, plan_for, transient, write_runs

_ALL4 = ("adamw", "muon", "normuon", "soap")

#: claim id -> (gaps that make it pass, gaps that make it fail, stats for both)
SCENARIOS = {
    "adamw-vs-muon": (
        {"adamw/2bw": 0.3, "adamw/2bw+sync-start": 0.25, "muon/2bw": 0.0},
        {"adamw/2bw": 0.01, "adamw/2bw+sync-start": 0.01, "muon/2bw": 0.2}, {}),
    "ef-halves-gap": (
        {k: v for o in _ALL4 for k, v in ((f"{o}/2bw", 0.2), (f"{o}/2bw+ef", 0.05),
                                          (f"{o}/2bw+sync-start", 0.15))},
        {k: v for o in _ALL4 for k, v in ((f"{o}/2bw", 0.2), (f"{o}/2bw+ef", 0.18),
                                          (f"{o}/2bw+sync-start", 0.05))},
        {f"{o}/2bw+ef": {"cos_consecutive_update": 0.8} for o in _ALL4}),
    "momentum-direction": (
        {"adamw/2bw": 0.3, "adamw/2bw/beta1=0.8": 0.15, "muon/2bw": 0.1,
         "muon/2bw/momentum=0.85": 0.05},
        {"adamw/2bw": 0.3, "adamw/2bw/beta1=0.8": 0.45, "muon/2bw": 0.1,
         "muon/2bw/momentum=0.85": 0.02}, {}),
    "horizon": (
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.2), (f"{o}/2bw/steps=0.5x", 0.2), (f"{o}/2bw+ef", 0.1),
            (f"{o}/2bw+ef/steps=0.5x", 0.1))},
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.4), (f"{o}/2bw/steps=0.5x", 0.2), (f"{o}/2bw+ef", 0.1),
            (f"{o}/2bw+ef/steps=0.5x", 0.1))}, {}),
    "pipedream-depth": (
        {"muon/pipedream P=2": 0.05, "muon/pipedream P=3": 0.15, "muon/pipedream P=4": 0.3,
         "muon/2bw": 0.1},
        {"muon/pipedream P=2": 0.3, "muon/pipedream P=3": 0.2, "muon/pipedream P=4": 0.05,
         "muon/2bw": 0.1}, {}),
    "learning-rate": (
        {"muon/2bw": 0.1, "muon/2bw/lr=0.5x": 0.04, "adamw/2bw": 0.3, "adamw/2bw/lr=2x": 0.6},
        {"muon/2bw": 0.1, "muon/2bw/lr=0.5x": 0.2, "adamw/2bw": 0.3, "adamw/2bw/lr=2x": 0.1},
        {}),
    "weight-decay": (
        {"muon/2bw": 0.1, "muon/2bw/wd=0.01": 0.1, "muon/2bw/wd=1": 0.3, "adamw/2bw": 0.3,
         "adamw/2bw/wd=0.01": 0.5, "adamw/2bw/wd=1": 0.5},
        {"muon/2bw": 0.1, "muon/2bw/wd=0.01": 0.3, "muon/2bw/wd=1": 0.3, "adamw/2bw": 0.3,
         "adamw/2bw/wd=0.01": 0.5, "adamw/2bw/wd=1": 0.5}, {}),
    "warmup": (
        {"adamw/2bw": 0.3, "adamw/2bw/warmup=20%": 0.2, "muon/2bw": 0.1,
         "muon/2bw/warmup=20%": 0.08},
        {"adamw/2bw": 0.3, "adamw/2bw/warmup=20%": 0.4, "muon/2bw": 0.1,
         "muon/2bw/warmup=20%": 0.15}, {}),
    "grad-clip": ({}, {"muon/2bw/clip=1": 0.3}, {}),
    "lr-schedule": ({}, {"muon/2bw/constant": 0.4}, {}),
    "beta2": (
        {"adamw/2bw": 0.3, "adamw/2bw/beta2=0.99": 0.4, "soap/2bw": 0.3,
         "soap/2bw/beta2=0.99": 0.2},
        {"adamw/2bw": 0.3, "adamw/2bw/beta2=0.99": 0.4, "soap/2bw": 0.3,
         "soap/2bw/beta2=0.99": 0.4}, {}),
    "batch-size": (
        {"muon/2bw/bs=0.5x": 0.05, "muon/2bw": 0.1, "muon/2bw/bs=2x": 0.2},
        {"muon/2bw/bs=0.5x": 0.2, "muon/2bw": 0.1, "muon/2bw/bs=2x": 0.05}, {}),
    "dcasgd": ({}, {"muon/2bw+dcasgd(c=100000)": 0.0}, {}),
    "ef-coefficient": (
        {k: v for o in _ALL4 for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+ef(lam=0.5)", 0.1 if o == "normuon" else 0.2),
            (f"{o}/2bw+ef", 0.2 if o == "normuon" else 0.1))},
        {k: v for o in _ALL4 for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+ef(lam=0.5)", 0.25), (f"{o}/2bw+ef", 0.1))}, {}),
    "alignment": ({}, {}, None),
    "grad-level-ef": (
        {"adamw/2bw+grad-ef": DIVERGED, "muon/2bw+grad-ef": DIVERGED},
        {"adamw/2bw+grad-ef": 0.1, "muon/2bw+grad-ef": 0.1}, {}),
    "sync-phases": (
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+sync-start", 0.25), (f"{o}/2bw+sync-cooldown", 0.05))},
        {k: v for o in ("adamw", "muon") for k, v in (
            (f"{o}/2bw", 0.3), (f"{o}/2bw+sync-start", 0.1), (f"{o}/2bw+sync-cooldown", 0.35))},
        {}),
}

_ALIGN_PASS = {**{f"{o}/2bw": {"cos_delayed_fresh": 0.97, "rel_err_delayed_fresh": 0.2}
                  for o in _ALL4},
               **{f"{o}/2bw+sync-start": {"rel_err_delayed_fresh": transient(0.0, 0.6, 0.2)}
                  for o in _ALL4[1:]}}
_ALIGN_FAIL = {**{f"{o}/2bw": {"cos_delayed_fresh": 0.5, "rel_err_delayed_fresh": 0.8}
                  for o in _ALL4},
               **{f"{o}/2bw+sync-start": {"rel_err_delayed_fresh": transient(0.0, 0.1, 0.3)}
                  for o in _ALL4[1:]}}


def _stats(claim_id: str, which: str):
    if claim_id == "alignment":
        return _ALIGN_PASS if which == "pass" else _ALIGN_FAIL
    return SCENARIOS[claim_id][2]


def test_every_claim_has_scenarios():
    assert set(SCENARIOS) == set(CLAIMS)


@pytest.mark.parametrize("which", ["pass", "fail"])
@pytest.mark.parametrize("claim_id", list(CLAIMS))
def test_claim_verdict_follows_the_data(tmp_path, claim_id, which):
    claim = CLAIMS[claim_id]
    plan = plan_for(claim)
    gaps = SCENARIOS[claim_id][0 if which == "pass" else 1]
    write_runs(tmp_path, claim, plan, gaps, _stats(claim_id, which))
    res = analyse(claim, ClaimData(claim, plan, tmp_path))
    assert res.status == which, (res.reason, [c.to_dict() for c in res.checks])
    assert res.n_seeds == 3 and res.runs


@pytest.mark.parametrize("claim_id", ["adamw-vs-muon", "ef-halves-gap", "beta2", "alignment"])
def test_missing_runs_are_inconclusive_with_the_reason(tmp_path, claim_id):
    claim = CLAIMS[claim_id]
    res = analyse(claim, ClaimData(claim, plan_for(claim), tmp_path))
    assert res.status == "inconclusive"
    assert "0 of 3 seeds finished" in res.reason or "not measured" in res.reason


def test_one_seed_quick_is_inconclusive_but_keeps_the_reading(tmp_path):
    claim = CLAIMS["learning-rate"]
    plan = plan_for(claim, seeds=(0,), quick=True)
    write_runs(tmp_path, claim, plan, SCENARIOS["learning-rate"][0])
    res = analyse(claim, ClaimData(claim, plan, tmp_path))
    assert res.status == "inconclusive" and res.quick
    assert "only 1 seed" in res.reason


def test_quick_with_three_seeds_is_marked_not_evidence(tmp_path):
    claim = CLAIMS["learning-rate"]
    plan = plan_for(claim, quick=True)
    write_runs(tmp_path, claim, plan, SCENARIOS["learning-rate"][0])
    res = analyse(claim, ClaimData(claim, plan, tmp_path))
    assert res.status == "inconclusive" and "would read pass" in res.reason


def test_theory_comparison_is_reported(tmp_path):
    claim = CLAIMS["momentum-direction"]
    plan = plan_for(claim)
    write_runs(tmp_path, claim, plan, SCENARIOS["momentum-direction"][0])
    res = analyse(claim, ClaimData(claim, plan, tmp_path))
    assert res.measured["direction found"] == "lower momentum, smaller gap"
    assert "shrinks with alpha" in res.measured["theory's direction"]
    assert res.agreement == "agrees"
    assert {v.id for v in res.theory_verdicts} == {"gap_vs_momentum[adamw]",
                                                   "gap_vs_momentum[muon]"}
