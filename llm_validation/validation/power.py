"""How many seeds an undecided check would need: the power of the t interval's decision.

An inconclusive check has a measured per-seed spread ``s`` and a distance ``delta`` between
its estimate and the boundary the interval must clear. :func:`seeds_needed` answers: with the
true effect equal to the estimate and the spread equal to ``s``, how many seeds give the 95%
interval a ``power`` chance (50%, 80%) of lying entirely on the estimate's side?

Algorithm
    The interval clears the boundary iff ``T = (mean - boundary) sqrt(n) / s > t_{n-1,q}``
    (``q = (1 + level)/2``). Under the assumed effect ``T`` is noncentral t with ``n - 1``
    degrees of freedom and noncentrality ``delta sqrt(n) / s``; the answer is the smallest
    ``n >= 2`` with ``P(T > t_{n-1,q}) >= power`` (scipy ``nct``), searched up to
    :data:`MAX_SEEDS`.

Assumptions
    Normal per-seed values; the measured mean and spread are the truth (a plug-in estimate:
    with 3 seeds the spread itself is uncertain, so the count is a guide, not a promise). For an
    equivalence check (both ends inside ``+-w``) ``delta = w - |mean|`` is the distance to the
    nearer margin; the far margin is ignored (slightly optimistic).

Guarantee
    Monotone: a larger ``delta`` or a smaller ``s`` never needs more seeds.

Reference
    The noncentral-t power of the one-sample t test (e.g. Cohen, *Statistical Power Analysis*,
    1988, ch. 2).
"""

from __future__ import annotations

import math

from scipy import stats

from llm_validation.validation.inference import DEFAULT_LEVEL
from llm_validation.validation.student import t_quantile

__all__ = ["POWERS", "MAX_SEEDS", "seeds_needed"]

#: The powers the ledger reports seeds for.
POWERS = (0.5, 0.8)
#: Search limit: beyond this many seeds the answer is reported as "more than MAX_SEEDS".
MAX_SEEDS = 1000


def _power(n: int, z: float, level: float) -> float:
    crit = float(t_quantile(level, n - 1))
    return float(stats.nct.sf(crit, n - 1, z * math.sqrt(n)))


def seeds_needed(delta: float, sd: float, power: float,
                 level: float = DEFAULT_LEVEL) -> int | None:
    """Smallest seed count giving ``power`` (see the module docstring); None when no count up
    to :data:`MAX_SEEDS` does (including ``delta <= 0``: the estimate sits on the boundary)."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"seeds_needed: power={power!r} must be in (0, 1)")
    if not (math.isfinite(delta) and math.isfinite(sd)) or sd < 0:
        raise ValueError(f"seeds_needed: delta={delta!r}, sd={sd!r} must be finite, sd >= 0")
    if delta <= 0:
        return None
    if sd == 0:
        return 2
    z = delta / sd
    if _power(MAX_SEEDS, z, level) < power:
        return None
    lo, hi = 2, MAX_SEEDS                  # power is increasing in n: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if _power(mid, z, level) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo
