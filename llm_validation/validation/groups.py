"""Groups of runs the checks compare, and the per-seed numbers they take from each run.

- :func:`base_conditions`: per optimizer, the condition the headline comparisons use: among
  the conditions with synchronous and one-step-delayed (tau = 1, no EF) runs paired by seed,
  the one with the most paired seeds, then the most seeds with EF runs too, then the lowest
  mean synchronous validation loss (the optimizer at its best tuned setting, as the paper
  compares them).
- :func:`families`: conditions that differ from each other in exactly one swept field
  (``optim.lr``, ``optim.momentum``/``optim.beta1``, ``run.batch_size``): one family per value
  of everything else, e.g. an lr sweep.
- per-seed run statistics over the logged metrics (:func:`series_stat`), computed over the
  steps at or after :data:`SKIP_FRACTION` of training (the first steps from the random
  initialisation are a transient the theorems' constants are not about).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Callable, Iterable, Sequence

import numpy as np

from llm_validation.validation.runs import RunRecord, paired_gaps, sync_partner

__all__ = [
    "SKIP_FRACTION",
    "select",
    "base_conditions",
    "families",
    "series_stat",
    "per_seed",
    "gaps_by_seed",
    "ef_rows",
]

#: Fraction of the run skipped by the assumption statistics (the initial transient).
SKIP_FRACTION = 0.1


def select(runs: Iterable[RunRecord], *, optimizer: str | None = None,
           condition: str | None = None, mode: str | None = None, tau: int | None = None,
           lam: float | None = None, pipeline: str | None = "none",
           completed: bool = True) -> list[RunRecord]:
    """Runs matching every given filter (``pipeline=None`` accepts any); ``completed``: only
    usable runs (``RunRecord.usable``: finished, not diverged, metrics whole)."""
    out = []
    for r in runs:
        if optimizer is not None and r.optimizer != optimizer:
            continue
        if condition is not None and r.condition != condition:
            continue
        if mode is not None and r.mode != mode:
            continue
        if tau is not None and r.tau != tau:
            continue
        if lam is not None and r.lam != lam:
            continue
        if pipeline is not None and r.pipeline != pipeline:
            continue
        if completed and not r.usable:
            continue
        out.append(r)
    return sorted(out, key=lambda r: (r.seed, r.name))


def base_conditions(runs: Sequence[RunRecord], metric: str = "final") -> dict[str, str]:
    """optimizer -> the condition of its headline comparison (see the module docstring)."""
    best: dict[str, tuple[int, int, float, str]] = {}
    for cond in sorted({r.condition for r in runs}):
        delayed = select(runs, condition=cond, mode="delay", tau=1)
        if not delayed:
            continue
        gaps = paired_gaps(delayed, runs, metric)
        if not gaps:
            continue
        opt = delayed[0].optimizer
        syncs = [r.val_metric(metric) for r in select(runs, condition=cond, mode="sync")]
        n_ef = max((len(ef_rows(runs, cond, lam, metric=metric)) for lam in
                    {r.lam for r in select(runs, condition=cond, mode="ef", tau=1)}),
                   default=0)
        score = (len(gaps), n_ef, -float(np.mean(syncs)), cond)
        if opt not in best or score > best[opt]:
            best[opt] = score
    return {opt: s[3] for opt, s in sorted(best.items())}


_FIELD_OF = {"lr": ("optim.lr",), "momentum": ("optim.momentum", "optim.beta1"),
             "batch_size": ("run.batch_size",)}


def families(runs: Sequence[RunRecord], axis: str) -> list[dict[float, str]]:
    """Families of conditions varying only in ``axis`` (``lr``, ``momentum``, ``batch_size``):
    each a mapping axis value -> condition, with at least two values, per optimizer."""
    if axis not in _FIELD_OF:
        raise ValueError(f"axis={axis!r} is not one of {list(_FIELD_OF)}")
    value = {"lr": lambda r: r.lr, "momentum": lambda r: r.momentum,
             "batch_size": lambda r: float(r.batch_size)}[axis]
    fields = _FIELD_OF[axis]
    if axis == "momentum":   # the knob differs by optimizer; drop only the one that is swept
        groups: dict[str, dict[float, str]] = defaultdict(dict)
        for r in runs:
            knob = "optim.beta1" if r.optimizer == "adamw" else "optim.momentum"
            groups[r.condition_without(knob)][value(r)] = r.condition
    else:
        groups = defaultdict(dict)
        for r in runs:
            groups[r.condition_without(*fields)][value(r)] = r.condition
    return [dict(sorted(g.items())) for _, g in sorted(groups.items()) if len(g) >= 2]


def series_stat(run: RunRecord, key: str, fn: Callable[[np.ndarray], float],
                skip: float = SKIP_FRACTION, min_points: int = 3) -> float | None:
    """``fn`` of the finite values of ``key`` logged at steps >= skip * steps (None if fewer
    than ``min_points``)."""
    steps, vals = run.series(key)
    keep = steps >= skip * run.steps
    vals = vals[keep]
    if vals.size < min_points:
        return None
    out = float(fn(vals))
    return out if math.isfinite(out) else None


def per_seed(runs: Sequence[RunRecord], fn: Callable[[RunRecord], float | None]
             ) -> dict[int, float]:
    """seed -> fn(run) over runs (one per seed), dropping None."""
    out = {}
    for r in runs:
        v = fn(r)
        if v is not None:
            out[r.seed] = float(v)
    return dict(sorted(out.items()))


def gaps_by_seed(runs: Sequence[RunRecord], condition: str, *, tau: int = 1,
                 metric: str = "final") -> dict[int, float]:
    """seed -> gap of the delayed (no EF) runs at ``tau`` of ``condition``."""
    return paired_gaps(select(runs, condition=condition, mode="delay", tau=tau), runs, metric)


def ef_rows(runs: Sequence[RunRecord], condition: str, lam: float, *,
            metric: str = "final") -> dict[int, tuple[float, float, RunRecord]]:
    """seed -> (gap without EF, gap with EF at ``lam``, the EF run), tau = 1, seeds with all
    three runs (sync, delayed, EF) completed."""
    delayed = {r.seed: r for r in select(runs, condition=condition, mode="delay", tau=1)}
    out = {}
    for e in select(runs, condition=condition, mode="ef", tau=1, lam=lam):
        d, s = delayed.get(e.seed), sync_partner(e, runs)
        if d is None or s is None:
            continue
        vs, vd, ve = s.val_metric(metric), d.val_metric(metric), e.val_metric(metric)
        if None in (vs, vd, ve):
            continue
        out[e.seed] = (vd - vs, ve - vs, e)
    return dict(sorted(out.items()))
