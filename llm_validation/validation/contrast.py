"""Per-seed linear contrasts and ratios of paired means: how the ledger compares arms.

Runs with the same seed share the initialisation and the data order, so every comparison of
arms is made seed by seed. A statement about several arms becomes one number per seed, a
*linear contrast* ``c_s = sum_k w_k x_k[s]`` of the arms' per-seed values, and its t interval
over seeds (:func:`contrast_interval`) decides it. Ratios become contrasts: "EF removes more
than half the gap" (``1 - gap_EF / gap > 1/2``) is ``gap - 2 gap_EF > 0``; "the ratio
``gap_b / gap_a`` is below r" is ``r gap_a - gap_b > 0``. Where a ratio must be shown it is
Fieller's interval of the ratio of paired means (:func:`ratio_interval`), which excludes r
exactly when the t interval of the contrast ``y - r x`` excludes 0 (Fieller's set is that
inversion), so the shown ratio and the verdict never disagree.

Algorithm
    :func:`contrast` keeps the seeds every input has and sums ``w_k x_k[s]``;
    :func:`contrast_interval` is :func:`~llm_validation.validation.inference.t_interval` of
    those values (method ``paired-t``); :func:`ratio_interval` is
    :func:`~llm_validation.validation.student.fieller_bounds`.

Assumptions
    Seeds are independent; the per-seed contrast (or the pair) is normal.

Guarantee
    Coverage ``level`` at every n >= 2 (see :mod:`llm_validation.validation.student`).

Reference
    Paired comparisons: e.g. Montgomery, *Design and Analysis of Experiments*, ch. 2 (paired t)
    and ch. 3 (contrasts); Fieller (1954).
"""

from __future__ import annotations

from typing import Mapping

from llm_validation.validation.inference import DEFAULT_LEVEL, Interval, t_interval
from llm_validation.validation.student import fieller_bounds

__all__ = ["contrast", "contrast_interval", "ratio_interval", "share_removed_interval"]


def contrast(inputs: Mapping[str, Mapping[int, float]],
             weights: Mapping[str, float]) -> dict[int, float]:
    """seed -> ``sum_k weights[k] * inputs[k][seed]`` over the seeds every weighted input has."""
    unknown = set(weights) - set(inputs)
    if unknown:
        raise ValueError(f"contrast: weights name inputs {sorted(unknown)} that are not given")
    used = [k for k, w in weights.items() if w != 0]
    if not used:
        raise ValueError("contrast: needs a nonzero weight")
    seeds = set.intersection(*(set(inputs[k]) for k in used))
    return {s: float(sum(weights[k] * inputs[k][s] for k in used)) for s in sorted(seeds)}


def contrast_interval(samples: Mapping[int, float], level: float = DEFAULT_LEVEL) -> Interval:
    """The paired t interval of per-seed contrast values (method ``paired-t``)."""
    iv = t_interval(list(samples.values()), level)
    if iv.method != "t":
        return iv
    return Interval(estimate=iv.estimate, lo=iv.lo, hi=iv.hi, level=iv.level, n=iv.n,
                    method="paired-t")


def ratio_interval(x: Mapping[int, float], y: Mapping[int, float],
                   level: float = DEFAULT_LEVEL) -> Interval:
    """Fieller interval of ``mean(y) / mean(x)`` over the seeds both have (paired); unbounded
    with fewer than 2 seeds or when mean(x) is not significantly nonzero."""
    seeds = sorted(set(x) & set(y))
    n = len(seeds)
    if n == 0:
        return Interval.unbounded(level=level)
    est, lo, hi = (float(v) for v in fieller_bounds([x[s] for s in seeds],
                                                    [y[s] for s in seeds], level))
    if n < 2 or lo == float("-inf"):
        return Interval.unbounded(est, n=n, level=level)
    return Interval(estimate=est, lo=min(lo, est), hi=max(hi, est), level=level, n=n,
                    method="fieller")


def share_removed_interval(gap: Mapping[int, float], gap_fixed: Mapping[int, float],
                           level: float = DEFAULT_LEVEL) -> Interval:
    """``1 - mean(gap_fixed) / mean(gap)``: the share of the gap a fix removes, from Fieller's
    interval of the ratio (:func:`ratio_interval`, end points mirrored)."""
    r = ratio_interval(gap, gap_fixed, level)
    if r.method != "fieller":
        return Interval.unbounded(1.0 - r.estimate, n=r.n, level=level)
    return Interval(estimate=1.0 - r.estimate, lo=1.0 - r.hi, hi=1.0 - r.lo, level=level,
                    n=r.n, method="fieller")
