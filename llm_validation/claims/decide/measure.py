"""Small measurements shared by the claim analyses (on :class:`~llm_validation.claims.decide.data.ClaimData`).

- :func:`need`: a check with the arms' missing runs named in its reason;
- :func:`gap_interval` / :func:`mean_gap`: an arm's paired gap over seeds;
- :func:`gap_ratio_interval`: Fieller's interval of the ratio of two arms' mean gaps (paired);
- :func:`margin`: the equivalence margin of an arm (a fixed lag, in its loss units);
- :func:`trend_records`: the run records of some arms, for ``validation.trends`` checks;
- :func:`above` / :func:`below`: a one-sided check of a paired contrast ``a - b``;
- :func:`gap_change` / :func:`vs_base` / :func:`gap_side`: a setting's gap against the base
  setting's (each gap against its own synchronous partner, same seed).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from llm_validation.claims.decide.checks import Check, diff, with_missing
from llm_validation.claims.decide.data import ClaimData, paired
from llm_validation.claims.decide.regime import lag_margin
from llm_validation.validation.contrast import ratio_interval
from llm_validation.validation.inference import Interval, t_interval
from llm_validation.validation.runs import RunRecord

__all__ = ["need", "interval_of", "gap_interval", "mean_gap", "gap_ratio_interval", "margin",
           "margin_text", "trend_records", "above", "below", "gap_change", "vs_base", "gap_side"]


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
    """Equivalence margin around arm ``key``: the loss difference that is a lag of
    :data:`~llm_validation.claims.decide.regime.PAPER_LAG_FRACTION` of the run on the synchronous
    partners' curves (:func:`regime.lag_margin`): the paper's 0.01-nat resolution, fixed
    before the runs in a scale-free unit (it no longer depends on the gap being judged)."""
    width, _ = lag_margin(d.partner_records(key))
    return width if math.isfinite(width) else 0.0


def margin_text(d: ClaimData, key: str) -> str:
    """How :func:`margin` was set, in words."""
    return f"margin for {key}: " + lag_margin(d.partner_records(key))[1]


def trend_records(d: ClaimData, keys: Sequence[str]) -> list[RunRecord]:
    """The finished runs of ``keys`` (and their partners), for ``validation.trends``."""
    out: dict[str, RunRecord] = {}
    for key in keys:
        for k in (key, d.claim.arm(key).partner().key):
            for r in d.records(k):
                out[r.name] = r
    return list(out.values())


def above(label: str, a, b, scale: float = 1.0) -> Check:
    """``scale a - b > 0``, paired by seed (``a``, ``b``: (name, per-seed values))."""
    return diff(label, "side", a, b, scale, boundary=0.0, predicted="above")


def below(label: str, a, b) -> Check:
    """``a - b < 0``, paired by seed."""
    return diff(label, "side", a, b, boundary=0.0, predicted="below")


def gap_change(d: ClaimData, key: str, base: str) -> dict[int, float]:
    """seed -> gap(key) - gap(base)."""
    return paired(d.gaps(key), d.gaps(base))


def vs_base(text: str, kind: str, d: ClaimData, key: str, base: str, **params) -> Check:
    """A ``kind`` check of the contrast gap(key) - gap(base), with missing runs named."""
    return need(diff(text, kind, (f"gap {key}", d.gaps(key)), (f"gap {base}", d.gaps(base)),
                     **params), d, key, base)


def gap_side(text: str, d: ClaimData, key: str, base: str, predicted: str) -> Check:
    """gap(key) - gap(base) on the ``predicted`` side of 0."""
    return vs_base(text, "side", d, key, base, boundary=0.0, predicted=predicted)
