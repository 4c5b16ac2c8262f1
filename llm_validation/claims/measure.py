"""Small measurements shared by the claim analyses (on :class:`~llm_validation.claims.data.ClaimData`).

- :func:`need`: a check with the arms' missing runs named in its reason;
- :func:`gap_interval` / :func:`mean_gap`: an arm's paired gap over seeds;
- :func:`gap_ratio_interval`: Fieller's interval of the ratio of two arms' mean gaps (paired);
- :func:`margin`: the equivalence margin around an arm's gap (scale-free floor);
- :func:`trend_records`: the run records of some arms, for ``validation.trends`` checks.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from llm_validation.claims.checks import Check, with_missing
from llm_validation.claims.data import ClaimData
from llm_validation.claims.regime import EQUIV_REL, nats_threshold
from llm_validation.validation.contrast import ratio_interval
from llm_validation.validation.inference import Interval, t_interval
from llm_validation.validation.runs import RunRecord

__all__ = ["need", "interval_of", "gap_interval", "mean_gap", "gap_ratio_interval", "margin",
           "margin_text", "trend_records"]


def need(check: Check, d: ClaimData, *keys: str) -> Check:
    """``check`` with the missing runs of ``keys`` added to its reason when inconclusive."""
    return with_missing(check, d.missing(*keys))


def interval_of(samples: Mapping[int, float]) -> Interval:
    """t interval of per-seed values."""
    return t_interval(list(samples.values()))


def gap_interval(d: ClaimData, key: str) -> Interval:
    """t interval of an arm's paired gaps over seeds."""
    return interval_of(d.gaps(key))


def mean_gap(d: ClaimData, key: str) -> float:
    g = d.gaps(key)
    return float(np.mean(list(g.values()))) if g else float("nan")


def gap_ratio_interval(d: ClaimData, den: str, num: str) -> Interval:
    """Fieller interval of mean gap(num) / mean gap(den), paired by seed."""
    return ratio_interval(d.gaps(den), d.gaps(num))


def margin(d: ClaimData, key: str) -> float:
    """Equivalence margin around arm ``key``'s gap: ``max(floor, EQUIV_REL * |mean gap|)``,
    the floor the paper's 0.01 nats in this scale's units (:func:`regime.nats_threshold`)."""
    floor, _ = nats_threshold(d.partner_records(key))
    ref = abs(mean_gap(d, key))
    ref = ref if math.isfinite(ref) else 0.0
    return max(floor if math.isfinite(floor) else 0.0, EQUIV_REL * ref)


def margin_text(d: ClaimData, key: str) -> str:
    """How :func:`margin` was set, in words."""
    _, floor = nats_threshold(d.partner_records(key))
    return (f"max({EQUIV_REL:g} x |gap of {key}|, floor: {floor}) = {margin(d, key):.3g}")


def trend_records(d: ClaimData, keys: Sequence[str]) -> list[RunRecord]:
    """The finished runs of ``keys`` (and their partners), for ``validation.trends``."""
    out: dict[str, RunRecord] = {}
    for key in keys:
        for k in (key, d.claim.arm(key).partner().key):
            for r in d.records(k):
                out[r.name] = r
    return list(out.values())
