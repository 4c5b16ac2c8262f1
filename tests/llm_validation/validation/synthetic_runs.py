"""Synthetic run directories for the validation tests: chosen gaps and statistics per seed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from llm_validation.config import DelayConfig
from llm_validation.records.atomic_io import write_json
from llm_validation.records.run_name import point_name
from llm_validation.sweep.grid import default_base

__all__ = ["STEPS", "STATS_EVERY", "fake_run", "headline"]

STEPS = 60
STATS_EVERY = 5


def fake_run(root: Path, *, opt: str, val: float, seed: int, tau: int = 0, lam: float = 0.0,
             lr: float | None = None, momentum: float | None = None, batch: int | None = None,
             smooth_spread: float = 1.5, star_bad: float = 0.0, drift: float = 1.0,
             cos_cons: float = 0.8, status: str = "completed", mom_err: float = 0.01) -> Path:
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
                       cos_delayed_fresh=0.9, momentum_error=mom_err,
                       ef_drift=drift + 0.01 * rng.standard_normal() if tau else None)
        rows.append(row)
    rows.append({"step": STEPS, "val_loss": val, "kind": "eval"})
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
