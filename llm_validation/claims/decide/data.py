"""A claim's run directories, per arm and seed, and the paired numbers its analysis reads.

:class:`ClaimData` maps each (arm key, seed) of a claim to its run directory through the plan
(:class:`llm_validation.claims.plan.plan.Plan`) and reads the finished ones with
:class:`llm_validation.validation.runs.RunRecord`. Gaps are paired by seed with the arm's
synchronous partner arm (:meth:`ClaimData.gaps`); every other comparison between arms is paired
by seed too (:func:`paired`): runs with the same seed share the initialisation and the data
order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

from llm_validation.claims.record.claim import Claim
from llm_validation.claims.plan.plan import Plan
from llm_validation.validation.lag import Lag, run_lag
from llm_validation.validation.runs import RunRecord, is_complete

__all__ = ["ClaimData", "paired"]


def paired(a: Mapping[int, float], b: Mapping[int, float]) -> dict[int, float]:
    """seed -> a[seed] - b[seed] over the seeds both have."""
    return {s: a[s] - b[s] for s in sorted(set(a) & set(b))}


class ClaimData:
    """The finished runs of one claim (see the module docstring)."""

    def __init__(self, claim: Claim, plan: Plan, runs_dir: str | Path) -> None:
        self.claim = claim
        self.seeds = plan.seeds_of(claim.id)
        self.quick = plan.quick
        self.runs_dir = Path(runs_dir)
        self._names: Mapping[tuple[str, int], str] = plan.index[claim.id]
        self._why: dict[str, str] = {}
        self._records: dict[str, RunRecord | None] = {}
        for (key, _), name in self._names.items():
            if name in self._records:
                continue
            run = plan.run(name)
            if run.cfg is None:
                self._why.setdefault(key, run.unavailable)
                self._records[name] = None
            elif is_complete(self.runs_dir / name):
                self._records[name] = RunRecord.load(self.runs_dir / name)
            else:
                self._records[name] = None

    # ------------------------------------------------------------------------------ runs
    def record(self, key: str, seed: int) -> RunRecord | None:
        """The finished run (completed or diverged) of an arm and seed, or None."""
        name = self._names.get((key, seed))
        if name is None:
            raise KeyError(f"claim {self.claim.id}: no arm {key!r}")
        return self._records[name]

    def run_name(self, key: str, seed: int) -> str | None:
        """The planned run directory name of an arm and seed (None: not planned)."""
        return self._names.get((key, seed))

    def records(self, key: str) -> list[RunRecord]:
        """The finished runs of an arm, by seed."""
        return [r for s in self.seeds if (r := self.record(key, s)) is not None]

    def run_names(self) -> list[str]:
        """Names of the claim's finished runs."""
        return sorted(n for n, r in self._records.items() if r is not None)

    # ----------------------------------------------------------------------------- numbers
    def vals(self, key: str, metric: str = "final") -> dict[int, float]:
        """seed -> final validation loss (``best``: the lowest validation loss of the run) of
        the completed (not diverged) runs."""
        out = {}
        for r in self.records(key):
            if r.final_val is None:
                continue
            v = r.final_val if metric == "final" else r.summary.get("best_val_loss")
            if v is not None and math.isfinite(float(v)):
                out[r.seed] = float(v)
        return out

    def gaps(self, key: str) -> dict[int, float]:
        """seed -> val(arm) - val(synchronous partner), paired by seed. The partner is the
        claim's own partner arm whatever the runs' condition labels say (a DC-ASGD arm's partner
        is the plain synchronous run, whose condition label differs)."""
        def finals(recs: list[RunRecord]) -> dict[int, float]:
            return {r.seed: v for r in recs if (v := r.val_metric("final")) is not None}
        return paired(finals(self.records(key)), finals(self.partner_records(key)))

    def partner_records(self, key: str) -> list[RunRecord]:
        """The finished runs of an arm's synchronous partner, by seed."""
        return self.records(self.claim.arm(key).partner().key)

    def lags(self, key: str) -> dict[int, Lag]:
        """seed -> the lag of a delayed arm's run behind its synchronous partner
        (:func:`llm_validation.validation.lag.run_lag`), for the seeds both completed."""
        partners = {r.seed: r for r in self.partner_records(key)}
        out = {}
        for r in self.records(key):
            p = partners.get(r.seed)
            if p is not None and (lg := run_lag(r, p)) is not None:
                out[r.seed] = lg
        return out

    def diverged(self, key: str) -> dict[int, bool]:
        """seed -> the run diverged: a non-finite loss stopped it, or its final validation
        loss is above its first (at the initial weights)."""
        out = {}
        for r in self.records(key):
            if r.status == "diverged":
                out[r.seed] = True
                continue
            _, v = r.series("val_loss")
            out[r.seed] = bool(r.final_val is not None and v.size and r.final_val > v[0])
        return out

    def mean_stat(self, key: str, metric: str, skip: float = 0.1) -> dict[int, float]:
        """seed -> mean of a logged statistic over steps >= skip * steps."""
        out = {}
        for r in self.records(key):
            steps, v = r.series(metric)
            keep = v[steps >= skip * r.steps]
            if keep.size:
                out[r.seed] = float(keep.mean())
        return out

    def missing(self, *keys: str) -> str:
        """Why some of ``keys`` lack finished runs ('' when every seed of every key has one)."""
        parts = []
        for key in keys:
            n = len(self.records(key))
            if n < len(self.seeds):
                why = f" ({self._why[key]})" if key in self._why else ""
                parts.append(f"{key}: {n} of {len(self.seeds)} seeds finished{why}")
        return "; ".join(parts)
