"""Multiplicity: adjusted p-values of a family of tests, and which of them a level rejects.

A ledger decides many checks at once. Deciding each at level ``1 - alpha`` keeps every single
check's error at ``alpha`` but lets the chance of *some* wrong verdict grow with the number of
checks (55 independent checks at 2.5% each: 1 - 0.975^55 ~ 75%). The two standard answers:

- :func:`holm`: Holm's step-down adjusted p-values, controlling the **family-wise error rate**
  (FWER: the probability of at least one false rejection) at ``alpha``;
- :func:`benjamini_hochberg`: the Benjamini-Hochberg step-up adjusted p-values, controlling the
  **false discovery rate** (FDR: the expected share of false rejections among the rejections).

:func:`rejected` gives the decision set at a level, :func:`adjusted` dispatches by name
(:data:`METHODS`, ``none`` leaving the p-values as they are), and :func:`rejection_levels` the
per-test significance level each rejected test is then decided at (the Bonferroni share of
its Holm step, the BH share ``alpha k*/K``). Every function takes the family on the last axis
of ``p``: a 1-D array is one family, a 2-D array one family per row (a simulation's replicates).

Algorithm
    Sort the ``K`` p-values, ``p_(1) <= ... <= p_(K)``.
    Holm: ``p~_(i) = max_{j <= i} min(1, (K - j + 1) p_(j))``; test ``(i)`` is rejected iff
    ``p~_(i) <= alpha``, i.e. iff ``p_(j) <= alpha / (K - j + 1)`` for every ``j <= i``.
    BH: ``p~_(i) = min_{j >= i} min(1, K p_(j) / j)`` (``scipy.stats.false_discovery_control``);
    the rejected tests are the ``k* = max{k : p_(k) <= k alpha / K}`` smallest.
    Ties in the p-values are ordered by position (a stable sort), which does not change any
    adjusted value.

Assumptions
    Each ``p_i`` is valid under its null hypothesis: ``P(p_i <= u) <= u`` for every ``u``.
    Holm needs nothing else (any dependence between the tests). BH needs independence or
    positive regression dependence (PRDS; Benjamini & Yekutieli 2001) of the null p-values.
    **Directional decisions.** When a rejected two-sided test is then read by its direction
    (pass or fail on the side its interval lies), a wrong direction (type III error) is an
    error too. For Holm, Shaffer (1980) proved that the step-down procedure with directional
    decisions keeps the probability of any type I or type III error at ``alpha`` for
    *independent* test statistics (under conditions met by t statistics; a counterexample
    exists for heavy-tailed ones); Finner (1999) extended it to a large class of stepwise
    procedures and to conditionally independent t statistics. For BH, deciding each of the
    ``R`` rejected parameters by its interval at level ``1 - R alpha / K`` keeps the false
    coverage-statement rate at ``alpha`` under independence (Benjamini & Yekutieli 2005).
    Where tests share data (one arm in two checks) these directional results are not proved;
    the family-wise simulation (``tests/llm_validation/claims/test_family.py``) measures it
    on independent checks.

Guarantee
    Holm: FWER <= ``alpha`` (type I) under any dependence; with directional decisions, as
    stated above. BH: FDR <= ``K0 alpha / K <= alpha`` (``K0`` true nulls) under independence
    or PRDS. Both are uniformly at least as powerful as Bonferroni (``K p_i <= alpha``).

Reference
    S. Holm (1979), "A simple sequentially rejective multiple test procedure", Scand. J.
    Statist. 6; Y. Benjamini & Y. Hochberg (1995), "Controlling the false discovery rate",
    J. R. Stat. Soc. B 57; J. P. Shaffer (1980), "Control of directional errors with
    stagewise multiple test procedures", Ann. Statist. 8; H. Finner (1999), "Stepwise multiple
    test procedures and control of directional errors", Ann. Statist. 27; Y. Benjamini &
    D. Yekutieli (2001), Ann. Statist. 29 (dependency); (2005), "False discovery
    rate-adjusted multiple confidence intervals for selected parameters", JASA 100.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats

__all__ = ["METHODS", "holm", "benjamini_hochberg", "adjusted", "rejected", "rejection_levels"]

#: Adjustment methods by name: Holm (FWER), Benjamini-Hochberg (FDR), none (per test).
METHODS = ("holm", "bh", "none")


def _pvalues(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """``p`` as a float array with a family axis, every value in [0, 1]."""
    x = np.asarray(p, dtype=np.float64)
    if x.ndim < 1:
        raise ValueError(f"p-values must have a family axis (the last), got shape {x.shape}")
    if not np.all((x >= 0) & (x <= 1)):               # also rejects NaN
        bad = x[~((x >= 0) & (x <= 1))]
        raise ValueError(f"p-values must lie in [0, 1], got {bad.ravel()[:5].tolist()}")
    return x


def _ranks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stable sort order, 1-based rank of each entry) along the last axis."""
    order = np.argsort(x, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(1, x.shape[-1] + 1), x.shape),
                      axis=-1)
    return order, rank


def _check_alpha(alpha: float) -> None:
    """Refuse a level outside (0, 1)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must be in (0, 1)")


def holm(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order of ``p`` (see the module docstring):
    ``p~_(i) = max_{j <= i} min(1, (K - j + 1) p_(j))``. The family is the last axis (a 2-D
    ``p`` is one family per row: the simulations)."""
    x = _pvalues(p)
    k = x.shape[-1]
    if k == 0:
        return x.copy()
    order, _ = _ranks(x)
    steps = np.minimum(1.0, (k - np.arange(k)) * np.take_along_axis(x, order, axis=-1))
    out = np.empty_like(x)
    np.put_along_axis(out, order, np.maximum.accumulate(steps, axis=-1), axis=-1)
    return out


def benjamini_hochberg(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (``scipy.stats.false_discovery_control``, method
    ``bh``), in the order of ``p``: ``p~_(i) = min_{j >= i} min(1, K p_(j) / j)``; the family
    is the last axis."""
    x = _pvalues(p)
    if x.shape[-1] == 0:
        return x.copy()
    return np.minimum(1.0, np.asarray(stats.false_discovery_control(x, axis=-1, method="bh"),
                                      dtype=np.float64))


def adjusted(p: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """The adjusted p-values of ``method`` (one of :data:`METHODS`; ``none``: ``p`` itself)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {list(METHODS)}")
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    return _pvalues(p).copy()


def rejected(p: Sequence[float] | np.ndarray, alpha: float, method: str) -> np.ndarray:
    """Boolean mask of the tests ``method`` rejects at level ``alpha``: adjusted p <= alpha."""
    _check_alpha(alpha)
    return adjusted(p, method) <= alpha


def rejection_levels(p: Sequence[float] | np.ndarray, alpha: float,
                     method: str) -> np.ndarray:
    """Per test, the significance level it is rejected at (NaN where it is not rejected):
    Holm ``alpha / (K - rank + 1)`` (``rank``: its 1-based place in the sorted p-values),
    BH ``alpha k* / K`` (``k*``: the number rejected), none ``alpha``. A rejected test's own
    p-value is at most its level, so a decision taken at that level is one the test makes.
    The family is the last axis."""
    x = _pvalues(p)
    mask = rejected(x, alpha, method)
    k = x.shape[-1]
    if method == "holm":
        level = alpha / (k - _ranks(x)[1] + 1)
    elif method == "bh":
        level = np.broadcast_to(alpha * mask.sum(axis=-1, keepdims=True) / max(k, 1), x.shape)
    else:
        level = np.full(x.shape, alpha)
    return np.where(mask, level, np.nan)
