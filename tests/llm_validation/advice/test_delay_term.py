"""The theory predictor: the PL law's factor, calibration and prediction on synthetic pairs."""

from __future__ import annotations

import math

import pytest

from llm_validation.advice.delay_term import (calibrate, delay_statistic, family,
                                              momentum_factor, predict_theory)
from llm_validation.advice.pilot import pairs, runs_from_claims
from tests.llm_validation.advice.synthetic_ledger import (DROP, pair_records, sync_record,
                                                          write_ledger)

#: Round-off of logs and exps.
EXACT = 1e-9


def test_momentum_factor_is_the_pl_law():
    # 2 tau (tau + 2 (1 - alpha)/alpha + 1/2) at tau = 1
    assert momentum_factor(1, 0.95) == pytest.approx(2 * (1 + 2 * 0.95 / 0.05 + 0.5), abs=EXACT)
    assert momentum_factor(1, 0.9) == pytest.approx(2 * (1 + 18 + 0.5), abs=EXACT)
    assert momentum_factor(2, 0.9) > 2 * momentum_factor(1, 0.9)     # quadratic in tau


def _runs(tmp_path, records):
    return runs_from_claims(write_ledger(tmp_path, records) / "claims.json")


def test_calibration_recovers_the_constant(tmp_path):
    # g = c Z exactly with c = 0.01, over different lr / L / eta: the fit must return c
    c, recs = 0.01, []
    for i, (L, eta) in enumerate([(10.0, 0.01), (20.0, 0.02), (5.0, 0.03)]):
        z = momentum_factor(1, 0.9) * L * eta ** 2 / DROP
        recs.append(pair_records(opt="adamw", T=200, seed=i, g=c * z, lr=1e-3 * (i + 1),
                                 L=L, eta=eta))
    ps = pairs(_runs(tmp_path, recs))
    cal = calibrate(ps, "nadamw", "delay")            # same family as adamw
    assert cal.n == 3 and cal.constant == pytest.approx(c, rel=EXACT)
    new = _runs(tmp_path / "new", [{"s": sync_record(opt="adamw", T=400, seed=9, L=40.0,
                                                     eta=0.005)}])[0]
    p = predict_theory([new], cal)
    want = c * momentum_factor(1, 0.9) * 40.0 * 0.005 ** 2 / DROP
    assert p.estimate == pytest.approx(want, rel=EXACT)
    assert p.hi / p.lo == pytest.approx(1.0, abs=EXACT)       # no scatter, no width
    assert calibrate(ps, "muon", "delay").n == 0               # another family
    with pytest.raises(ValueError, match="no calibration pair"):
        predict_theory([new], calibrate(ps, "muon", "delay"))


def test_scatter_gives_an_interval_and_nonpositive_gaps_are_dropped(tmp_path):
    recs = [pair_records(opt="muon", T=200, seed=s, g=g) for s, g in
            enumerate([0.02, 0.04, 0.03, -0.01])]
    cal = calibrate(pairs(_runs(tmp_path, recs)), "muon", "delay")
    assert cal.n == 3 and cal.dropped == 1
    p = predict_theory([pairs(_runs(tmp_path, recs))[0].sync], cal)
    assert p.lo < p.estimate < p.hi and math.isfinite(p.hi)


def test_missing_statistic_and_unknown_optimizer(tmp_path):
    rec = sync_record(opt="muon", T=200, seed=0)
    del rec["stats"]["smoothness_est"]
    run = _runs(tmp_path, [{"s": rec}])[0]
    with pytest.raises(ValueError, match="smoothness_est"):
        delay_statistic(run)
    with pytest.raises(ValueError, match="unknown optimizer"):
        family("rmsprop")
