"""The empirical predictor: the delay cost against the horizon, fitted on the pilot's horizons.

Algorithm
    The scale-free delay cost of a pair is its gap fraction ``g = (d - v_T) / (v_0 - v_T)``
    (:class:`~llm_validation.validation.lag.Lag`: the gap as a share of the synchronous run's
    loss decrease). Over the pilot's pairs of one optimizer and mode, at horizons ``T_i`` steps,
    fit ``g = a + b log T`` by least squares and read it at the target horizon ``T*``, with the
    t prediction interval ``g* +- t_{n-2} s sqrt(1 + x*' (X'X)^-1 x*)``. With a single horizon
    the trend is not identified: ``b = 0`` (g assumed constant in the horizon) and the interval is
    the t prediction interval of one more pair, ``mean +- t_{n-1} s sqrt(1 + 1/n)``; the result
    says so (``trend: "none (one horizon)"``).

Assumptions
    Pairs at one horizon are exchangeable draws (seeds, and whatever other variants the pilot
    pools: a ledger's lr, momentum and batch variants widen the interval rather than bias it);
    ``g`` is linear in ``log T`` over and beyond the pilot's horizons.

Guarantee
    Exact on data that lie on a line in ``log T`` (zero residual, zero-width interval); the
    interval is the usual Gaussian prediction interval, so it is only as good as the linear-in-
    ``log T`` assumption, which an extrapolation over two decades cannot check.

Reference
    Ordinary least squares prediction intervals (e.g. Seber & Lee, Linear Regression Analysis,
    ch. 5); the horizon axis follows the project's ledger-regime issue (1x..8x horizons).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

__all__ = ["LEVEL", "GapPrediction", "fit_horizon", "predict_empirical"]

#: Level of every interval advise prints (the validation's 95%).
LEVEL = 0.95


@dataclass(frozen=True, kw_only=True)
class GapPrediction:
    """A predicted gap fraction with its interval."""

    estimate: float
    """Predicted gap fraction g (share of the synchronous loss decrease)."""
    lo: float
    """Lower end of the interval (-inf when unbounded)."""
    hi: float
    """Upper end (+inf when unbounded)."""
    n: int
    """Pairs behind the prediction."""
    method: str
    """``empirical`` or ``theory``."""
    detail: dict[str, Any]
    """How it was made (fit coefficients, horizons, calibration constant...)."""

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "lo": self.lo, "hi": self.hi, "n": self.n,
                "method": self.method, **self.detail}


def fit_horizon(horizons: Sequence[float], fractions: Sequence[float], target: float,
                level: float = LEVEL) -> GapPrediction:
    """The module's fit of ``g = a + b log T`` on ``(horizons, fractions)``, read at ``target``
    steps. ``ValueError`` with no point, a non-positive horizon or a non-finite fraction."""
    T = np.asarray(horizons, dtype=np.float64)
    g = np.asarray(fractions, dtype=np.float64)
    if T.size == 0 or T.shape != g.shape:
        raise ValueError("fit_horizon needs one gap fraction per horizon, at least one pair")
    if np.any(T <= 0) or not np.all(np.isfinite(g)) or not target > 0:
        raise ValueError("fit_horizon needs positive horizons and finite gap fractions")
    n, q = T.size, 0.5 + level / 2
    distinct = np.unique(T)
    if distinct.size < 2:
        est = float(g.mean())
        if n < 2:
            return GapPrediction(estimate=est, lo=-math.inf, hi=math.inf, n=n,
                                 method="empirical", detail={"trend": "none (one horizon)",
                                                             "horizons": distinct.tolist()})
        half = float(stats.t.ppf(q, n - 1)) * float(g.std(ddof=1)) * math.sqrt(1 + 1 / n)
        return GapPrediction(estimate=est, lo=est - half, hi=est + half, n=n, method="empirical",
                             detail={"trend": "none (one horizon)", "horizons": distinct.tolist()})
    X = np.column_stack([np.ones(n), np.log(T)])
    coef, *_ = np.linalg.lstsq(X, g, rcond=None)
    x = np.array([1.0, math.log(target)])
    est = float(x @ coef)
    detail = {"trend": "g = a + b log T", "a": float(coef[0]), "b": float(coef[1]),
              "horizons": distinct.tolist()}
    if n <= 2:
        return GapPrediction(estimate=est, lo=-math.inf, hi=math.inf, n=n, method="empirical",
                             detail=detail)
    resid = g - X @ coef
    s2 = float(resid @ resid) / (n - 2)
    lever = float(x @ np.linalg.inv(X.T @ X) @ x)
    half = float(stats.t.ppf(q, n - 2)) * math.sqrt(s2 * (1 + lever))
    return GapPrediction(estimate=est, lo=est - half, hi=est + half, n=n, method="empirical",
                         detail=detail)


def predict_empirical(pairs: Sequence[Any], target: float,
                      level: float = LEVEL) -> GapPrediction:
    """:func:`fit_horizon` over ``pairs`` (:class:`~llm_validation.advice.pilot.DelayPair` of
    one optimizer and mode, finite gap fractions) at ``target`` steps."""
    use = [p for p in pairs if math.isfinite(p.gap_fraction)]
    if not use:
        raise ValueError("the empirical predictor needs at least one delayed/sync pair")
    return fit_horizon([p.horizon for p in use], [p.gap_fraction for p in use], target, level)
