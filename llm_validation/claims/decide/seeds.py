"""Seeds an inconclusive check would need to be decided, at its measured spread.

:func:`with_seeds_needed` fills :attr:`~llm_validation.claims.decide.checks.Check.seeds_needed` of
every inconclusive check (recursively through the parts of an aggregate) with the seed count at
which the interval at the check's level (``params["level"]``, 95% unless the seeds policy
set it) has a 50% and an 80% chance of deciding it, if the true effect and the
seed-to-seed spread are the measured ones (:func:`llm_validation.validation.power.seeds_needed`).

Algorithm
    For the per-seed sample of a seed kind with mean ``m`` and spread ``s``, the distances
    ``delta`` the interval must clear for each outcome the estimate points to:

    - ``side``: ``|m - boundary|``;
    - ``equivalence``: ``w - |m|`` (inside the margin) when ``|m| < w``, else ``|m| - w``;
    - ``differs``: ``|m|`` (exclude 0) and, when ``|m| < w``, ``w - |m|`` (inside the margin);
    - ``not_better``: ``-m`` (below 0) when ``m < 0``, and ``m + w`` (above ``-w``) when
      ``m > -w``;

    the count is the smallest over the outcomes. Group kinds need every group's interval to
    exclude 0 (``delta = |m_g|``): the largest count over groups. Aggregates: the largest count
    over their inconclusive parts (each must be decided). ``divergence`` counts outcomes, not a
    mean: no count (None).

Assumptions
    Those of :mod:`llm_validation.validation.power` (normal per-seed values, plug-in effect and
    spread; with 3 seeds the spread is itself uncertain: a guide, not a promise).

Guarantee
    A count is only given where a decision is reachable at the measured effect; None means
    "more than :data:`~llm_validation.validation.power.MAX_SEEDS`" or "not a seed-count
    question" (the estimate sits on the boundary, or the kind counts outcomes).

Reference
    Noncentral-t power of the one-sample t test (Cohen, 1988, ch. 2).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from llm_validation.claims.decide.checks import GROUP_KINDS, PART_KINDS, Check, level_of
from llm_validation.validation.power import POWERS, seeds_needed
from llm_validation.validation.verdict import INCONCLUSIVE

__all__ = ["with_seeds_needed", "distances", "power_key"]


def power_key(power: float) -> str:
    return f"{power:.0%}"


def distances(kind: str, m: float, params: Mapping[str, float]) -> list[float]:
    """The distances the interval must clear for each outcome the estimate points to."""
    if kind == "side":
        return [abs(m - float(params["boundary"]))]
    w = float(params.get("width", 0.0))
    if kind == "equivalence":
        return [w - abs(m)] if abs(m) < w else [abs(m) - w]
    if kind == "differs":
        return [abs(m)] + ([w - abs(m)] if abs(m) < w else [])
    if kind == "not_better":
        return ([-m] if m < 0 else []) + ([m + w] if m > -w else [])
    raise ValueError(f"distances: no seed-count rule for kind {kind!r}")


def _count(values: Sequence[float], deltas: Sequence[float], power: float,
           level: float) -> int | None:
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return None
    sd = float(x.std(ddof=1))
    counts = [n for d in deltas
              if d > 0 and (n := seeds_needed(d, sd, power, level=level)) is not None]
    return min(counts) if counts else None


def _largest(counts: Sequence[int | None]) -> int | None:
    return None if not counts or any(c is None for c in counts) else max(counts)


def _need_level(c: Check) -> float:
    """The level a count is computed at: ``params["need_level"]`` where the family set one (a
    check the family left open needs its Bonferroni level within the family, which decides it
    under Holm whatever the other checks do), else the check's own level."""
    return float(c.params.get("need_level", level_of(c.params)))


def _needed(c: Check, power: float) -> int | None:
    if c.kind in PART_KINDS:
        return _largest([_needed(p, power) for p in c.parts if p.status == INCONCLUSIVE])
    if c.kind == "divergence":
        return None
    if c.kind in GROUP_KINDS:
        return _largest([_count(list(v.values()), [abs(float(np.mean(list(v.values()))))],
                                power, _need_level(c)) for v in c.inputs.values() if v])
    if len(c.samples) < 2:
        return None
    vals = list(c.samples.values())
    return _count(vals, distances(c.kind, float(np.mean(vals)), c.params), power,
                  _need_level(c))


def with_seeds_needed(c: Check) -> Check:
    """``c`` (and its parts) with ``seeds_needed`` filled where inconclusive."""
    parts = tuple(with_seeds_needed(p) for p in c.parts)
    need = ({power_key(p): _needed(c, p) for p in POWERS} if c.status == INCONCLUSIVE
            else None)
    return Check(**{**c.__dict__, "parts": parts, "seeds_needed": need})
