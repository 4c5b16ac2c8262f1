"""A claim's arms as numbers: per seed the run, its losses and, for delayed arms, the gap and
the lag behind the synchronous partner, with intervals over seeds.

Next to every gap in loss units (nats per byte at the tiny scale, per token with a BPE
vocabulary) it puts the scale-free measures of :mod:`llm_validation.validation.lag`: the lag in
synchronous steps and as a fraction of the run, and the gap as a fraction of the synchronous
run's loss decrease. This is what ``claims.json`` stores under each claim's ``arms`` and what
the arm table of ``claims.md`` shows.
"""

from __future__ import annotations

import math
from typing import Any

from llm_validation.claims.decide.checks import number, seeds_of
from llm_validation.claims.decide.data import ClaimData
from llm_validation.claims.decide.measure import interval_of

__all__ = ["arm_table", "SCALE_FREE"]

#: The per-seed lag measures: (key in the table, Lag attribute, what it is).
SCALE_FREE = (("lag_steps", "steps", "lag (synchronous steps behind at the end)"),
              ("lag_fraction", "fraction", "lag as a fraction of the run"),
              ("gap_fraction", "gap_fraction", "gap as a fraction of the synchronous loss "
                                               "decrease"))


def _interval(values: dict[int, float]) -> dict[str, Any] | None:
    finite = {s: v for s, v in values.items() if math.isfinite(v)}
    if not finite:
        return None
    return {k: number(v) if isinstance(v, float) else v
            for k, v in interval_of(finite).to_dict().items()}


def arm_table(d: ClaimData) -> dict[str, Any]:
    """arm key -> {runs, final_val, best_val, [gap, lag_steps, lag_fraction, gap_fraction,
    censored], intervals}: per-seed values (string seeds) and t intervals over seeds."""
    out: dict[str, Any] = {}
    for arm in d.claim.all_arms():
        key = arm.key
        recs = d.records(key)
        row: dict[str, Any] = {
            "sync": arm.is_sync,
            "runs": {str(r.seed): r.name for r in recs},
            "final_val": seeds_of(d.vals(key)), "best_val": seeds_of(d.vals(key, "best"))}
        ivs = {"final_val": _interval(d.vals(key))}
        if not arm.is_sync:
            gaps, lags = d.gaps(key), d.lags(key)
            row["gap"] = seeds_of(gaps)
            ivs["gap"] = _interval(gaps)
            for name, attr, _ in SCALE_FREE:
                per = {s: float(getattr(lg, attr)) for s, lg in lags.items()}
                row[name] = seeds_of(per)
                ivs[name] = _interval(per)
            row["censored"] = {str(s): lg.censored for s, lg in lags.items() if lg.censored}
            row["extrapolated"] = sorted(str(s) for s, lg in lags.items() if lg.extrapolated)
        row["intervals"] = ivs
        out[key] = row
    return out
