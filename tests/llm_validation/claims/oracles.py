"""Test oracles of the claims package: slow definitions the fast code is tested against."""

from __future__ import annotations

import math

from llm_validation.claims.decide.checks import PART_KINDS, Check, at_level
from llm_validation.claims.decide.pvalues import FAMILY_KINDS
from llm_validation.validation.verdict import INCONCLUSIVE

__all__ = ["A_MIN", "BISECT_STEPS", "pvalue_by_bisection"]

#: Smallest error rate the bisection tries: below it ``1 - a`` keeps too few digits of ``a``
#: in double precision (relative error ~2e-16 / a); a p-value below it is reported as 0.
A_MIN = 1e-12
#: Bisection steps on log(a) over [A_MIN, 1 - A_MIN]: 2^-48 of the 28-nat range (1e-13
#: relative in a), finer than the tolerance the closed forms are tested to.
BISECT_STEPS = 48


def pvalue_by_bisection(c: Check) -> float | None:
    """``p_nom(c)`` from its definition, by bisection on ``log a`` with
    :func:`~llm_validation.claims.decide.checks.at_level` deciding at ``1 - a`` (the decided set is
    ``{a > p_nom}``: an interval that lies on a side of a point stays there as the level
    drops). 1.0 when ``a = 1 - A_MIN`` decides nothing; 0.0 when ``a = A_MIN`` already
    decides (p below :data:`A_MIN`); None for ``divergence``. The reference
    :func:`nominal_pvalue` is tested against."""
    if c.kind in PART_KINDS:
        raise ValueError(f"pvalue_by_bisection: {c.label!r} is an aggregate")
    if c.kind not in FAMILY_KINDS:
        return None

    def decides(log_a: float) -> bool:
        return at_level(c, 1.0 - math.exp(log_a)).status != INCONCLUSIVE

    lo, hi = math.log(A_MIN), math.log1p(-A_MIN)
    if not decides(hi):
        return 1.0
    if decides(lo):
        return 0.0
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return math.exp(hi)
