"""validate() on synthetic run directories whose answers are known by construction."""

from __future__ import annotations

import pytest

from llm_validation.validation.runs import is_complete, load_runs
from llm_validation.validation.validate import validate
from llm_validation.validation.verdict import FAIL, INCONCLUSIVE, PASS
from tests.llm_validation.validation.synthetic_runs import (
    fake_run,
    headline,
)


def test_headline_pass(tmp_path):
    headline(tmp_path, {"adamw": 0.30, "muon": 0.05}, ef_share={"adamw": 0.3, "muon": 0.6})
    rep = validate([tmp_path])
    st = {v.id: v.status for v in rep.verdicts}
    assert st["gap_adamw_gt_muon"] == PASS
    assert st["ef_gain[muon]"] == PASS and st["ef_gain[adamw]"] == PASS
    assert st["ef_criterion[muon]"] == PASS            # omega 0.6 < 1 and EF helps
    assert st["smoothness[adamw]"] == PASS             # spread 1.5 < 10
    assert st["star_convexity[muon]"] == PASS          # no violations
    assert st["noise[muon]"] == PASS
    v = rep.get("gap_adamw_gt_muon")
    assert v.measured["gap AdamW"].estimate == pytest.approx(0.30, abs=0.01)
    assert v.measured["difference AdamW - Muon"].lo > 0
    share = rep.get("ef_gain[muon]").measured["share of gap removed"]
    assert share.estimate == pytest.approx(0.6, abs=0.05) and share.method == "fieller"
    # theory's bounds at the measured constants (L = p95 smoothness 7.5, eta = lr, D = 1/wd)
    me = rep.get("momentum_error[muon]")
    assert me.status == PASS and me.measured["measured / bound"].hi < 1
    sc = rep.get("star_convex_delay_term[muon]")
    assert sc.status == PASS and sc.measured["looseness bound / gap"] > 1
    # sweeps absent: listed, inconclusive, saying why
    for vid in ("gap_vs_lr[adamw]", "gap_vs_tau[muon]", "gap_vs_batch[muon]",
                "ef_share_vs_alignment[muon]", "pipeline_matches_emulation"):
        assert st[vid] == INCONCLUSIVE and "not measured" in rep.get(vid).reason


def test_headline_fail_and_violated_assumptions(tmp_path):
    headline(tmp_path, {"adamw": 0.05, "muon": 0.30}, ef_share={"muon": -0.5},
             smooth_spread=100.0, star_bad=0.6)
    st = {v.id: v.status for v in validate([tmp_path]).verdicts}
    assert st["gap_adamw_gt_muon"] == FAIL
    assert st["ef_gain[muon]"] == FAIL                 # EF made it worse
    assert st["ef_criterion[muon]"] == FAIL            # omega < 1 predicted a gain
    assert st["smoothness[muon]"] == FAIL              # heavy tail: p95/median ~ 100 > 10
    assert st["star_convexity[muon]"] == FAIL          # 60% violations


def test_two_seeds_are_inconclusive_and_quick_marks_everything(tmp_path):
    headline(tmp_path, {"adamw": 0.30, "muon": 0.05}, seeds=(0, 1))
    rep = validate([tmp_path])
    assert rep.get("gap_adamw_gt_muon").status == INCONCLUSIVE
    assert "seed" in rep.get("gap_adamw_gt_muon").reason
    assert all(v.status != PASS for v in rep.verdicts if v.n_seeds < 3)
    q = validate([tmp_path], quick=True)
    assert q.quick and all(v.status == INCONCLUSIVE and v.quick for v in q.verdicts)


@pytest.mark.parametrize("power, expected", [(2.0, PASS), (0.3, FAIL)])
def test_lr_exponent(tmp_path, power, expected):
    for lr in (1e-3, 2e-3, 4e-3, 8e-3):
        gap = 0.3 * (lr / 8e-3) ** power
        for s in range(3):
            base = 2.0 + 0.01 * s
            fake_run(tmp_path, opt="muon", lr=lr, val=base, seed=s)
            fake_run(tmp_path, opt="muon", lr=lr, val=base + gap * (1 + 0.02 * (s - 1)),
                     seed=s, tau=1)
    v = validate([tmp_path]).get("gap_vs_lr[muon]")
    assert v.status == expected, v.reason
    assert v.measured["exponent"].contains(power)


def test_tau_shape_and_batch_and_momentum_slopes(tmp_path):
    alpha = 0.05   # muon momentum 0.95
    for s in range(3):
        for tau in (1, 2, 4):
            gap = 1e-3 * tau * (tau + 2 * (1 - alpha) / alpha + 0.5) * (1 + 0.02 * (s - 1))
            fake_run(tmp_path, opt="muon", val=2.0 + gap, seed=s, tau=tau)
        fake_run(tmp_path, opt="muon", val=2.0, seed=s)
        for bs, gap in ((8, 0.01), (32, 0.05)):
            fake_run(tmp_path, opt="muon", batch=bs, val=2.0, seed=s)
            fake_run(tmp_path, opt="muon", batch=bs, val=2.0 + gap + 0.001 * s, seed=s, tau=1)
        for mom, gap in ((0.8, 0.2), (0.9, 0.1)):    # against the prediction: less gap w/ more
            fake_run(tmp_path, opt="muon", momentum=mom, val=2.0, seed=s)
            fake_run(tmp_path, opt="muon", momentum=mom, val=2.0 + gap + 0.001 * s, seed=s,
                     tau=1)
    rep = validate([tmp_path])
    tau_v = rep.get("gap_vs_tau[muon]")
    assert tau_v.status == PASS and tau_v.measured["scale A (c = 1/2)"].contains(1e-3)
    assert rep.get("gap_vs_batch[muon]").status == PASS
    assert rep.get("gap_vs_momentum[muon]").status == FAIL


def test_incomplete_and_diverged_runs_are_noted_not_used(tmp_path):
    headline(tmp_path, {"adamw": 0.3, "muon": 0.05})
    d = fake_run(tmp_path, opt="muon", val=9.0, seed=7, tau=1, status="diverged")
    bad = fake_run(tmp_path, opt="muon", val=9.0, seed=8, tau=1)
    (bad / "summary.json").unlink()
    assert not is_complete(bad) and is_complete(d)
    rep = validate([tmp_path])
    assert any("diverged" in n for n in rep.notes) and any("unfinished" in n for n in rep.notes)
    assert rep.get("gap_adamw_gt_muon").status == PASS
    assert len(load_runs([tmp_path])) == 20


def test_no_runs_is_a_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        validate([tmp_path])
    with pytest.raises(FileNotFoundError):
        validate([tmp_path / "missing"])


@pytest.mark.parametrize("shares, expected", [((0.2, 0.4, 0.6), PASS), ((0.6, 0.4, 0.2), FAIL)])
def test_ef_share_tracks_alignment(tmp_path, shares, expected):
    gap = 0.2
    for s in range(3):
        base = 2.0 + 0.05 * s
        fake_run(tmp_path, opt="muon", val=base, seed=s)
        fake_run(tmp_path, opt="muon", val=base + gap, seed=s, tau=1)
        for lam, cos, share in zip((0.25, 0.5, 1.0), (0.5, 0.7, 0.9), shares):
            fake_run(tmp_path, opt="muon", val=base + (1 - share) * gap + 0.002 * s, seed=s,
                     tau=1, lam=lam, cos_cons=cos, drift=0.7)
    v = validate([tmp_path]).get("ef_share_vs_alignment[muon]")
    assert v.status == expected, v.reason
    assert v.measured["settings"] == 3
