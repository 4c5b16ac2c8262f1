"""Small measurements shared by the claim analyses (on :class:`~llm_validation.claims.data.ClaimData`).

- :func:`need`: a check with the arms' missing runs named in its reason;
- :func:`gap_interval` / :func:`mean_gap`: an arm's paired gap over seeds;
- :func:`ratio_of_means` / :func:`share_removed`: bootstrap statistics of paired rows;
- :func:`pairs`: paired rows (x, y) of two per-seed mappings;
- :func:`trend_records`: the run records of some arms, for ``validation.trends`` checks.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from llm_validation.claims.data import ClaimData
from llm_validation.claims.decisions import BOOTSTRAP_SEED, Check
from llm_validation.validation.inference import Interval, bootstrap_interval, t_interval
from llm_validation.validation.runs import RunRecord
from llm_validation.validation.verdict import INCONCLUSIVE

__all__ = ["need", "gap_interval", "mean_gap", "ratio_of_means", "share_removed", "pairs",
           "ratio_interval", "trend_records"]


def need(check: Check, d: ClaimData, *keys: str) -> Check:
    """``check`` with the missing runs of ``keys`` added to its reason when inconclusive."""
    missing = d.missing(*keys)
    if check.status != INCONCLUSIVE or not missing:
        return check
    return Check(label=check.label, status=check.status, interval=check.interval,
                 n_seeds=check.n_seeds, reason=f"{check.reason} (missing: {missing})")


def gap_interval(d: ClaimData, key: str) -> Interval:
    """t interval of an arm's paired gaps over seeds."""
    return t_interval(list(d.gaps(key).values()))


def mean_gap(d: ClaimData, key: str) -> float:
    g = d.gaps(key)
    return float(np.mean(list(g.values()))) if g else float("nan")


def pairs(a: Mapping[int, float], b: Mapping[int, float]) -> list[tuple[float, float]]:
    """(a[seed], b[seed]) over the seeds both have."""
    return [(a[s], b[s]) for s in sorted(set(a) & set(b))]


def ratio_of_means(rows: np.ndarray) -> float:
    """mean(second column) / mean(first column); NaN when the first mean is not > 0."""
    den = float(rows[:, 0].mean())
    return float(rows[:, 1].mean() / den) if den > 0 else float("nan")


def share_removed(rows: np.ndarray) -> float:
    """1 - mean(gap with the fix) / mean(gap without): rows are (gap, gap with the fix)."""
    r = ratio_of_means(rows)
    return 1.0 - r if math.isfinite(r) else float("nan")


def ratio_interval(rows: Sequence[tuple[float, float]]) -> Interval:
    """Bootstrap interval of :func:`ratio_of_means` (unbounded without rows)."""
    if not rows:
        return Interval.unbounded()
    return bootstrap_interval(np.asarray(rows, dtype=np.float64), ratio_of_means,
                              seed=BOOTSTRAP_SEED)


def trend_records(d: ClaimData, keys: Sequence[str]) -> list[RunRecord]:
    """The finished runs of ``keys`` (and their partners), for ``validation.trends``."""
    out: dict[str, RunRecord] = {}
    for key in keys:
        for k in (key, d.claim.arm(key).partner().key):
            for r in d.records(k):
                out[r.name] = r
    return list(out.values())
