"""Leave-one-out evaluation: folds, hits, and a synthetic ledger whose answer is known."""

from __future__ import annotations

import pytest

from llm_validation.advice.loo import evaluate, folds, hit
from llm_validation.advice.pilot import pairs, runs_from_claims
from tests.llm_validation.advice.synthetic_ledger import pair_records, write_ledger


def test_hit():
    assert hit(0.2, 0.1) and hit(0.05, 0.1) and hit(0.1, 0.1)
    assert not hit(0.21, 0.1) and not hit(0.049, 0.1)
    assert not hit(-0.1, -0.1) and not hit(0.1, 0.0)


def _ledger(tmp_path):
    # g depends on nothing but the optimizer: muon 0.05, normuon 0.06, adamw 0.2 at every lr
    # and horizon, so every fold that has the optimizer (or its family) predicts it exactly
    recs = []
    for opt, g in (("muon", 0.05), ("normuon", 0.06), ("adamw", 0.2)):
        for lr in (1e-3, 2e-3):
            for T in (100, 200):
                for seed in (0, 1):
                    recs.append(pair_records(opt=opt, T=T, seed=seed, g=g, lr=lr))
    return pairs(runs_from_claims(write_ledger(tmp_path, recs) / "claims.json"))


def test_folds(tmp_path):
    ps = _ledger(tmp_path)
    assert [lab for lab, _ in folds(ps, "horizon")] == ["100 steps", "200 steps"]
    assert len(folds(ps, "lr")) == 6 and len(folds(ps, "optimizer")) == 3
    assert sum(len(i) for _, i in folds(ps, "optimizer")) == len(ps) == 24
    with pytest.raises(ValueError, match="hold-out"):
        folds(ps, "seed")


def test_known_answer(tmp_path):
    res = evaluate(_ledger(tmp_path))
    emp = res["holdouts"]["horizon"]["empirical"]
    assert emp["pairs"] == 24 and emp["hit_rate"] == 1.0
    assert res["holdouts"]["lr"]["empirical"]["hit_rate"] == 1.0
    opt = res["holdouts"]["optimizer"]["empirical"]
    # muon <-> normuon predict each other (0.05 vs 0.06: a hit); adamw has no family member
    assert opt["predicted"] == 16 and opt["hits"] == 16 and opt["hit_rate_all"] == 16 / 24
    # the theory predictor's Z is the same for every pair here, so its constant is the
    # family's mean gap: exact within a family
    th = res["holdouts"]["lr"]["theory"]
    assert th["predicted"] == 24 and th["hit_rate"] == 1.0
    rows = res["holdouts"]["lr"]["rows"]
    assert all(r["measured"] > 0 and r["fold"] for r in rows)
