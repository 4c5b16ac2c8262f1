"""From the design's run folders to per-seed costs per cell: the compute-equivalent lag and the
gap share of every delayed arm, paired by seed with its cell's synchronous runs.

Algorithm
    For each cell, seed and optimizer: the synchronous run of ``T`` steps and the frontier runs
    at ``f T`` (:attr:`~llm_validation.delay_law.design.Cell.frontier`) give the frontier
    (:func:`~llm_validation.validation.envelope.envelope_lag`); a delayed arm's closing loss
    ``d`` (the fixed 1M-token set) is placed on it. ``gap = d - L_sync(T)``; the gap share is
    ``gap / (L_0 - L_sync(T))`` with ``L_0`` the synchronous run's first curve evaluation (the
    loss at initialisation, the same on any evaluation set to ~1e-3 of its value).
    A run that is missing, unfinished or damaged (:meth:`~llm_validation.validation.runs.
    RunRecord.damage`) leaves its seed out of that arm, and the cell says which and why.

Assumptions
    The run folders hold the design's runs under the names :func:`run_name` gives their
    configs; a delayed arm and its synchronous partners share the seed, batch, steps and lr.

Guarantee
    Every value is paired: an arm's seed is present only if the delayed run, the synchronous
    run and every frontier run of that seed are finished and intact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from llm_validation.claims.plan.plan import run_name
from llm_validation.delay_law.design import Cell
from llm_validation.delay_law.laws import Observed
from llm_validation.delay_law.runs import DesignRun, cell_runs
from llm_validation.validation.envelope import EnvelopeLag, envelope_lag
from llm_validation.validation.runs import RunRecord, is_complete

__all__ = ["CellCosts", "read_final", "cell_costs", "observed"]


@dataclass(frozen=True, kw_only=True)
class CellCosts:
    """One cell's per-seed costs, per delayed arm (``"adamw/2bw"``, ...)."""

    cell: Cell
    lag: Mapping[str, Mapping[int, EnvelopeLag]]
    """Arm -> seed -> compute-equivalent lag."""
    gap_share: Mapping[str, Mapping[int, float]]
    """Arm -> seed -> gap as a share of the synchronous loss decrease."""
    gap: Mapping[str, Mapping[int, float]]
    """Arm -> seed -> gap in nats per byte."""
    missing: tuple[str, ...] = field(default=())
    """One line per run that was left out (name and why)."""

    def lag_fraction(self, arm: str) -> dict[int, float]:
        return {s: v.fraction for s, v in self.lag.get(arm, {}).items()}


def read_final(runs_dir: Path, run: DesignRun) -> tuple[float | None, float | None, str]:
    """(closing loss on the fixed set, first curve loss, why not) of one design run."""
    path = runs_dir / run_name(run.cfg)
    if not is_complete(path):
        return None, None, f"{path.name}: not finished"
    rec = RunRecord.load(path)
    damage = rec.damage
    if damage:
        return None, None, f"{path.name}: {damage}"
    if rec.status != "completed" or rec.final_val is None or not math.isfinite(rec.final_val):
        return None, None, f"{path.name}: {rec.status}, no finite closing loss"
    first = next((r["val_loss"] for r in rec.rows if r.get("kind") in ("train", "eval")
                  and r.get("val_loss") is not None), None)
    return float(rec.final_val), first, ""


def cell_costs(cell: Cell, runs_dir: str | Path, lrs: Mapping[str, Mapping[str, float]]
               ) -> CellCosts:
    """The per-seed costs of ``cell`` from the finished runs under ``runs_dir``."""
    runs_dir = Path(runs_dir)
    loss: dict[tuple[str, str, float, int], float] = {}
    first: dict[tuple[str, int], float] = {}
    missing: list[str] = []
    runs: Sequence[DesignRun] = cell_runs(cell, lrs)
    for r in runs:
        value, v0, why = read_final(runs_dir, r)
        if value is None:
            missing.append(why)
            continue
        loss[(r.optimizer, r.mode, r.fraction, r.seed)] = value
        if r.mode == "sync" and r.fraction == 1.0 and v0 is not None:
            first[(r.optimizer, r.seed)] = float(v0)
    lag: dict[str, dict[int, EnvelopeLag]] = {}
    share: dict[str, dict[int, float]] = {}
    gap: dict[str, dict[int, float]] = {}
    for arm in cell.arms:
        opt, mode = arm.split("/")
        if mode == "sync":
            continue
        fractions = sorted({f for o, f in cell.frontier if o == opt} | {1.0})
        for r in (r for r in runs if r.kind == "arm" and r.optimizer == opt and r.mode == mode):
            keys = [(opt, "sync", f, r.seed) for f in fractions]
            d = loss.get((opt, mode, 1.0, r.seed))
            if d is None or any(k not in loss for k in keys):
                continue
            lv = envelope_lag([f * cell.steps for f in fractions], [loss[k] for k in keys], d,
                              total=cell.steps)
            lag.setdefault(arm, {})[r.seed] = lv
            gap.setdefault(arm, {})[r.seed] = lv.gap
            v0, vt = first.get((opt, r.seed)), loss[(opt, "sync", 1.0, r.seed)]
            if v0 is not None and v0 > vt:
                share.setdefault(arm, {})[r.seed] = lv.gap / (v0 - vt)
    return CellCosts(cell=cell, lag=lag, gap_share=share, gap=gap, missing=tuple(missing))


def observed(costs: Mapping[str, CellCosts], arm: str, quantity: str) -> list[Observed]:
    """The cells' per-seed ``quantity`` of ``arm`` as laws read them (cells lacking the arm
    are left out)."""
    out = []
    for name, c in costs.items():
        values = (c.lag_fraction(arm) if quantity == "lag" else dict(c.gap_share.get(arm, {})))
        if values:
            out.append(Observed(name=name, n_params=c.cell.n_params, steps=c.cell.steps,
                                lr_rel=c.cell.lr_multiple, values=values))
    return out
