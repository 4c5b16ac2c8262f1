"""End points of the ledger's intervals, vectorised over draws: Student-t and Fieller.

Everything here is numpy over the last axis, so one call computes the interval of one sample
(the ledger) or of 20,000 simulated samples at once (the coverage test,
``tests/llm_validation/validation/test_student.py``). :mod:`llm_validation.validation.inference`
builds its :class:`~llm_validation.validation.inference.Interval` objects from these.

Algorithm
    - :func:`t_quantile`: ``t_{dof, (1+level)/2}`` from the inverse regularized beta
      function (``q^2 / (dof + q^2)`` is Beta(1/2, dof/2)), exact near the median too.
    - :func:`t_bounds`: ``mean +- t_{n-1, (1+level)/2} s / sqrt(n)`` of each row.
    - :func:`fieller_set`: the Fieller confidence set ``{r : (b - r a)^2 <= q^2 Var(b - r a)}``
      of a ratio ``b / a`` of two estimates with variances ``vaa``, ``vbb`` and covariance
      ``vab``: the roots of ``(a^2 - q^2 vaa) r^2 - 2 (a b - q^2 vab) r + (b^2 - q^2 vbb)``.
    - :func:`fieller_bounds`: the ratio of paired means ``mean(y) / mean(x)`` (rows are seeds,
      x and y measured on the same seed): :func:`fieller_set` with the sample (co)variances of
      the means and ``q = t_{n-1}``.

Assumptions
    The rows (seeds) are independent draws; the per-seed values (t) or pairs (Fieller) are
    normal. The gaps the ledger reads are differences of final losses of runs that share a
    seed, so the seed-to-seed variation largely cancels and what is left is close to normal.

Guarantee
    Exact coverage ``level`` under the assumptions, for every n >= 2: the t interval because
    ``(mean - mu) sqrt(n) / s`` is t-distributed; the Fieller set because
    ``(mean(y) - r mean(x)) sqrt(n) / s(y - r x)`` is t-distributed at the true ratio r. Where
    the Fieller set is not a bounded interval (the denominator is not significantly nonzero),
    it is returned as ``(-inf, inf)``, which covers: the coverage is then at least ``level``.
    The percentile bootstrap has no such guarantee at small n (at n = 3 it returns about
    ``[min, max]`` of three values and covers about 75%; the test shows it).

Reference
    Student (1908), "The probable error of a mean"; E. C. Fieller (1954), "Some problems in
    interval estimation", J. R. Stat. Soc. B 16.
"""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["t_quantile", "t_bounds", "fieller_set", "fieller_bounds"]


def t_quantile(level: float, dof: np.ndarray | float) -> np.ndarray:
    """The two-sided Student-t quantile ``q = t_{dof, (1 + level) / 2}``: ``P(|t| <= q) =
    level``, accurate to a few ulps at every level in (0, 1) and every finite ``dof > 0``.

    ``x = q^2 / (dof + q^2)`` is Beta(1/2, dof/2)-distributed, so ``x = I^-1_{1/2, dof/2}(level)``
    and ``1 - x = I^-1_{dof/2, 1/2}(1 - level)`` (each from its own inverse, neither from a
    difference), and ``q = sqrt(dof x / (1 - x))``. ``stats.t.ppf(0.5 + level / 2, dof)``
    is not used: near the median (``level`` below ~1e-7) it returns 0 or a multiple of
    2^-25 at ``dof`` 4 and 6 (scipy 1.17), and rounding ``0.5 + level / 2`` costs it
    ``1e-16 / min(level, 1 - level)`` relative everywhere. This form is within 3e-15 relative of a 40-digit
    mpmath inversion on ``dof`` 1-10, ``level`` 1e-12 to 0.99999 (measured once;
    ``tests/llm_validation/validation/test_inference.py`` checks the t CDF at ``q``)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level!r} must be in (0, 1)")
    half = np.asarray(dof, dtype=np.float64) / 2
    x = special.betaincinv(0.5, half, level)
    one_minus_x = special.betaincinv(half, 0.5, 1.0 - level)
    return np.asarray(np.sqrt(2 * half * x / one_minus_x), dtype=np.float64)


def t_bounds(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lo, hi) of the t interval of each row of ``x`` (samples on the last axis);
    with fewer than 2 samples the bounds are ``-inf, inf``."""
    a = np.asarray(x, dtype=np.float64)
    n = a.shape[-1]
    mean = a.mean(axis=-1) if n else np.full(a.shape[:-1], np.nan)
    if n < 2:
        inf = np.full(np.shape(mean), np.inf)
        return mean, -inf, inf
    half = t_quantile(level, n - 1) * a.std(axis=-1, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def fieller_set(a: np.ndarray, b: np.ndarray, vaa: np.ndarray, vbb: np.ndarray,
                vab: np.ndarray, q: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of the Fieller set of ``b / a``; ``(-inf, inf)`` where it is not a bounded
    interval (``a^2 <= q^2 vaa``: a is not significantly nonzero, or no real roots)."""
    a, b, vaa, vbb, vab = (np.asarray(v, dtype=np.float64) for v in (a, b, vaa, vbb, vab))
    q2 = np.asarray(q, dtype=np.float64) ** 2
    qa = a * a - q2 * vaa
    qb = -2.0 * (a * b - q2 * vab)
    qc = b * b - q2 * vbb
    disc = qb * qb - 4.0 * qa * qc
    bounded = (qa > 0) & (disc >= 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sqrt(np.where(bounded, disc, 0.0))
        den = np.where(bounded, 2.0 * qa, 1.0)
        lo = np.where(bounded, (-qb - r) / den, -np.inf)
        hi = np.where(bounded, (-qb + r) / den, np.inf)
    return lo, hi


def fieller_bounds(x: np.ndarray, y: np.ndarray, level: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean(y) / mean(x), lo, hi): Fieller's interval for the ratio of paired means of the
    rows of ``x`` and ``y`` (seeds on the last axis); unbounded for fewer than 2 seeds."""
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError(f"fieller_bounds: x has shape {xa.shape}, y {ya.shape}")
    n = xa.shape[-1]
    mx, my = xa.mean(axis=-1), ya.mean(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(mx != 0, my / np.where(mx != 0, mx, 1.0), np.nan)
    if n < 2:
        inf = np.full(np.shape(est), np.inf)
        return est, -inf, inf
    dx, dy = xa - mx[..., None], ya - my[..., None]
    vxx = (dx * dx).sum(axis=-1) / (n - 1) / n
    vyy = (dy * dy).sum(axis=-1) / (n - 1) / n
    vxy = (dx * dy).sum(axis=-1) / (n - 1) / n
    lo, hi = fieller_set(mx, my, vxx, vyy, vxy, t_quantile(level, n - 1))
    return est, lo, hi
