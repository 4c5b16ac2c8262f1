"""The sign-flip permutation test of a paired per-seed contrast, beside the t test.

A ledger's checks read per-seed paired differences ``x_s`` (delayed minus synchronous, one
seed each) and decide them with Student-t intervals, which assume normal differences. The
sign-flip test assumes only that each difference is symmetric about the null value, so it is
the referee's check of the t test's p-value: where the two disagree, the normality assumption
is doing the work.

Algorithm
    ``d_s = x_s - null``; statistic ``T(e) = mean_s e_s d_s`` for sign vectors ``e`` in
    ``{-1, +1}^n``. One-sided ``greater``: ``p = #{e : T(e) >= T(1)} / 2^n`` over all ``2^n``
    sign vectors (``less``: ``<=``; ``two-sided``: ``|T(e)| >= |T(1)|``). Exact enumeration up
    to :data:`EXACT_MAX` seeds; above it, ``draws`` random sign vectors from ``seed`` and ``p =
    (1 + #{hits}) / (1 + draws)`` (the identity counted once, which keeps the Monte-Carlo p
    valid). Comparisons allow a relative slack of :data:`TIE_RTOL` so float rounding of equal
    sums does not break ties.

Assumptions
    The ``d_s`` are independent and each symmetric about 0 under the null (seeds are
    independent replicates; the paired difference of two exchangeable runs is symmetric).

Guarantee
    Exact: ``P(p <= u) <= u`` for every ``u`` under the null (a randomisation test; the
    simulation test checks it at 3-5 seeds). The p-value cannot fall below ``1 / 2^n``
    one-sided and ``2 / 2^n`` two-sided (:func:`min_pvalue`): with 3, 4, 5 seeds 1/8, 1/16,
    1/32, so at 3 seeds no one-sided check can pass at 5% by this test alone. Every ledger
    prints that floor beside the p-value.

Reference
    R. A. Fisher (1935), *The Design of Experiments*, section 21 (the randomisation test of
    paired differences); E. J. G. Pitman (1937), "Significance tests which may be applied to
    samples from any populations", JRSS Suppl. 4.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

__all__ = ["ALTERNATIVES", "EXACT_MAX", "TIE_RTOL", "sign_flip_pvalue", "min_pvalue"]

#: Alternatives of the test.
ALTERNATIVES = ("greater", "less", "two-sided")
#: Largest seed count enumerated exactly (2^16 = 65,536 sign vectors).
EXACT_MAX = 16
#: Relative slack of the "at least as extreme" comparison: sums of the same numbers in another
#: order differ by a few ulps, which must count as a tie (the identity always counts).
TIE_RTOL = 1e-12


def _signs(n: int, draws: int, seed: int) -> np.ndarray:
    """All ``2^n`` sign vectors (n <= EXACT_MAX), or the identity plus ``draws`` random ones."""
    if n <= EXACT_MAX:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    rng = np.random.default_rng(seed)
    random = rng.choice((-1.0, 1.0), size=(draws, n))
    return np.vstack([np.ones((1, n)), random])


def sign_flip_pvalue(x: Sequence[float], null: float = 0.0, alternative: str = "greater", *,
                     draws: int = 20_000, seed: int = 0) -> float:
    """The sign-flip p-value of ``mean(x) > null`` (``alternative``: ``greater``, ``less`` or
    ``two-sided``); see the module docstring."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not one of {list(ALTERNATIVES)}")
    d = np.asarray(x, dtype=np.float64) - float(null)
    if d.ndim != 1 or d.size < 1 or not np.all(np.isfinite(d)):
        raise ValueError(f"sign_flip_pvalue needs a 1-D array of finite values, got {x!r}")
    if draws < 1:
        raise ValueError(f"draws={draws!r} must be >= 1")
    signs = _signs(d.size, draws, seed)
    stat = signs @ d / d.size
    obs = stat[0]                                   # the first row is the identity
    slack = TIE_RTOL * max(1.0, float(np.abs(d).sum()) / d.size)
    if alternative == "greater":
        hits = stat >= obs - slack
    elif alternative == "less":
        hits = stat <= obs + slack
    else:
        hits = np.abs(stat) >= abs(obs) - slack
    # exact: hits / 2^n; Monte Carlo: (1 + hits among the draws) / (1 + draws), the identity
    # being row 0 of ``signs`` in both cases
    return int(hits.sum()) / len(stat)


def min_pvalue(n: int, alternative: str = "greater") -> float:
    """The smallest p-value the exact sign-flip test can give with ``n`` seeds."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r} is not one of {list(ALTERNATIVES)}")
    if n < 1:
        raise ValueError(f"n={n!r} must be >= 1")
    return (2.0 if alternative == "two-sided" else 1.0) / math.pow(2.0, n)
