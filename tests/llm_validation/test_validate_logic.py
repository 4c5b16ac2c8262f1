"""validate() on synthetic run directories whose answers are known by construction."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from llm_validation.checkpoint import write_json
from llm_validation.config import DelayConfig
from llm_validation.run_table import is_complete, load_runs
from llm_validation.sweep_grid import default_base, point_name
from llm_validation.validate import validate
from llm_validation.verdict import FAIL, INCONCLUSIVE, PASS

STEPS = 60
STATS_EVERY = 5


def fake_run(root: Path, *, opt: str, val: float, seed: int, tau: int = 0, lam: float = 0.0,
             lr: float | None = None, momentum: float | None = None, batch: int | None = None,
             smooth_spread: float = 1.5, star_bad: float = 0.0, drift: float = 1.0,
             cos_cons: float = 0.8, status: str = "completed") -> Path:
    """A run directory with the given final validation loss and statistics."""
    cfg = default_base(opt, steps=STEPS)
    optim = cfg.optim
    if lr is not None:
        optim = dataclasses.replace(optim, lr=lr)
    if momentum is not None:
        optim = dataclasses.replace(optim, **{"beta1" if opt == "adamw" else "momentum": momentum})
    run = dataclasses.replace(cfg.run, seed=seed, batch_size=batch or cfg.run.batch_size)
    cfg = cfg.replace(optim=optim, run=run, delay=DelayConfig(tau=tau, ef_lambda=lam))
    d = root / point_name(cfg)
    d.mkdir(parents=True)
    cfg = cfg.replace(run=dataclasses.replace(cfg.run, out_dir=str(d)))
    write_json(d / "config.json", {**cfg.to_dict(), "meta": {"synthetic": True}})
    rng = np.random.default_rng(1000 * seed + tau + int(10 * lam))
    rows = []
    for step in range(STEPS):
        row = {"step": step, "loss": val + 2.0 * np.exp(-step / 10), "lr": cfg.optim.lr,
               "val_loss": val + 2.0 * np.exp(-step / 10) if step % 20 == 0 else None}
        if step % STATS_EVERY == 0:
            # smoothness: median 5; every 4th measurement 5 * smooth_spread (so it is the p95)
            outlier = (step // STATS_EVERY) % 4 == 0
            row.update(smoothness_est=5.0 * (smooth_spread if outlier else 1.0)
                       * (1 + 0.01 * rng.standard_normal()),
                       smoothness_est_l2=2.0, grad_norm=1.0, grad_dual_norm=30.0,
                       star_convex_slack=-1e-3 if rng.random() < star_bad else 1e-3,
                       grad_noise_var=0.04 * (1 + 0.1 * rng.random()),
                       update_primal_norm=cfg.optim.lr, cos_consecutive_update=cos_cons,
                       cos_delayed_fresh=0.9, momentum_error=0.01,
                       ef_drift=drift + 0.01 * rng.standard_normal() if tau else None)
        rows.append(row)
    rows.append({"step": STEPS, "val_loss": val})
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_json(d / "summary.json", {"run_dir": str(d), "status": status, "steps": STEPS,
                                    "final_val_loss": val if status == "completed" else None})
    return d


def headline(root: Path, gaps: dict, seeds=(0, 1, 2), ef_share: dict | None = None, **kw):
    """sync/2bw/2bw+ef runs per optimizer with gap = gaps[opt] (+ seed noise)."""
    for opt, gap in gaps.items():
        for s in seeds:
            base = 2.0 + 0.05 * s                 # seed-to-seed spread, removed by pairing
            noise = 0.004 * ((s * 7919) % 5 - 2)  # small deterministic paired noise
            fake_run(root, opt=opt, val=base, seed=s, **kw)
            fake_run(root, opt=opt, val=base + gap + noise, seed=s, tau=1, **kw)
            share = (ef_share or {}).get(opt, 0.5)
            fake_run(root, opt=opt, val=base + (1 - share) * gap + noise, seed=s, tau=1,
                     lam=1.0, drift=0.6, **kw)


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
    assert share.estimate == pytest.approx(0.6, abs=0.05) and share.method == "bootstrap"
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
