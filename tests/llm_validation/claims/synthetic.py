"""Synthetic run directories for the claims tests: every planned run of a claim, with chosen
gaps (or divergence) and statistics per arm.

A scenario maps arm keys to the mean gap of that delayed arm (``DIVERGED`` for a run that
stopped on a non-finite loss); synchronous arms get ``2.0 + 0.05 * seed`` (seed-to-seed spread
that pairing removes) and every delayed arm ``partner + gap + noise`` with a small
deterministic noise per arm and seed, so intervals are narrow but not degenerate. Statistics
(``stats``) map arm keys to ``{metric: value or fn(step, sync_start)}``.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Callable, Mapping

from llm_validation.claims.record.claim import Claim
from llm_validation.claims.plan.plan import Plan, build_plan
from llm_validation.claims.plan.scales import get_scale
from llm_validation.records.atomic_io import write_json

__all__ = ["DIVERGED", "NOISE", "plan_for", "write_runs", "transient"]

#: Marks an arm whose runs diverge.
DIVERGED = "diverged"
#: Amplitude of the per-arm, per-seed noise on a delayed run's loss (nats).
NOISE = 0.002
#: Default gap of a delayed arm a scenario does not name.
DEFAULT_GAP = 0.1


def plan_for(claim: Claim, seeds=(0, 1, 2), quick: bool = False) -> Plan:
    return build_plan([claim], get_scale("tiny"), seeds=seeds, quick=quick)


def _noise(key: str, seed: int) -> float:
    h = zlib.crc32(f"{key}|{seed}".encode())
    return NOISE * ((h % 5) - 2) / 2


def _val_curve(final: float, steps: int, every: int) -> list[tuple[int, float]]:
    pts = list(range(0, steps, every)) + [steps]
    return [(s, final + 3.0 * (1 - s / steps) ** 2) for s in pts]


#: Tokens per parameter the synthetic runs report (the paper's regime, so that a long-run
#: claim such as the divergence one is decided; a test passes another value to get short runs).
SYNTHETIC_TPP = 25.0


def write_runs(root: Path, claim: Claim, plan: Plan, gaps: Mapping[str, Any],
               stats: Mapping[str, Mapping[str, Any]] | None = None,
               tokens_per_param: float = SYNTHETIC_TPP) -> None:
    """Write every run of ``claim`` in ``plan`` under ``root`` (see the module docstring)."""
    stats = stats or {}
    for (key, seed), name in plan.index[claim.id].items():
        d = root / name
        if d.exists():
            continue
        cfg = plan.run(name).cfg
        arm = claim.arm(key)
        base = 2.0 + 0.05 * seed
        gap = gaps.get(key, DEFAULT_GAP) if not arm.is_sync else 0.0
        d.mkdir(parents=True)
        write_json(d / "config.json", {**cfg.to_dict(), "meta": {"synthetic": True}})
        steps, run = cfg.run.steps, cfg.run
        start = cfg.delay.sync_start
        diverged = gap == DIVERGED
        final = None if diverged else base + gap + (0.0 if arm.is_sync else _noise(key, seed))
        rows: list[dict[str, Any]] = []
        vals = dict(_val_curve(final if final is not None else base, steps,
                               run.eval_interval or steps))
        stop = steps // 2 if diverged else steps
        for step in range(0, stop, 5):
            row: dict[str, Any] = {"step": step, "loss": vals.get(step, final or base) + 0.01,
                                   "val_loss": vals.get(step)}
            if run.stats_interval and step % run.stats_interval == 0:
                for metric, v in stats.get(key, {}).items():
                    row[metric] = v(step, start, run.stats_interval) if callable(v) else v
            rows.append(row)
        if diverged:
            rows.append({"step": stop, "loss": None, "val_loss": None, "diverged": True})
        else:
            rows.append({"step": steps, "val_loss": final})
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        write_json(d / "summary.json", {
            "run_dir": str(d), "status": "diverged" if diverged else "completed",
            "steps": stop if diverged else steps, "final_val_loss": final,
            "n_params": cfg.model.n_params(),
            "tokens": int(tokens_per_param * cfg.model.n_params()),
            "best_val_loss": None if diverged else min(v for v in vals.values())})


def transient(before: float, spike: float, after: float) -> Callable[[int, int, int], float]:
    """A statistic that is ``before`` until the switch at ``start``, ``spike`` at the first
    statistics step after it, then ``after``."""
    def f(step: int, start: int, every: int) -> float:
        if step < start:
            return before
        return spike if step < start + every else after
    return f
