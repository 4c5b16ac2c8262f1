"""The empirical predictor: the delay cost against the horizon, fitted on the pilot's horizons.

Algorithm
    The scale-free delay cost of a pair is its gap fraction ``g = (d - v_T) / (v_0 - v_T)``
    (:class:`~llm_validation.validation.lag.Lag`: the gap as a share of the synchronous run's
    loss decrease). Over the pilot's pairs of one optimizer and mode, at horizons ``T_i`` steps,
    fit the power law ``log g = a + b log T`` by least squares and read it at the target horizon
    ``T*``: the estimate ``exp(a + b log T*)`` with the t prediction interval
    ``exp(l* +- t_{n-2} s sqrt(1 + x*' (X'X)^-1 x*))`` of the log-scale line (always positive).
    If any pair has ``g <= 0`` (no logarithm) the line is fitted to ``g`` itself
    (``g = a + b log T``) and the result says so; that line is read at ``T*`` only inside the
    pilot's horizons and at the nearest end of them beyond (a line in ``g`` extrapolated
    crosses zero: a delayed run predicted "ahead" of its synchronous twin by as much as the
    line likes). With a single horizon (or horizons spanning less than
    :data:`MIN_TREND_SPREAD`, which no design varies on purpose) the trend is not
    identified: ``b = 0`` (g assumed constant in the horizon) and the interval is the t prediction
    interval of one more pair on the same scale: ``exp(m +- t_{n-1} s sqrt(1 + 1/n))`` with
    ``m, s`` the mean and spread of ``log g`` (the estimate the geometric mean; both ends
    positive), or ``mean +- ...`` of ``g`` itself when a pair has ``g <= 0`` (``trend: "none
    (one horizon): ..."``, saying which). ``detail["scale"]`` is ``log`` or ``g``.

Assumptions
    Pairs at one horizon are exchangeable draws (seeds, and whatever other variants the pilot
    pools: a ledger's lr, momentum and batch variants widen the interval rather than bias it);
    ``log g`` is linear in ``log T`` over and beyond the pilot's horizons, with Gaussian
    residuals: the gap shrinks (or grows) as a power of the horizon, which is what the horizon
    ladder measures (claim 18: per-optimizer log-log slopes; docs/advise.md). Why not a line in
    ``g``: it crosses zero when extrapolated, predicting a 2BW run that beats its synchronous
    twin.

Guarantee
    Exact on data that follow a power law (zero residual, zero-width interval); the interval is
    the Gaussian prediction interval on the log scale, so it is only as good as the power-law
    assumption, which an extrapolation over two decades cannot check.

Reference
    Ordinary least squares prediction intervals (e.g. Seber & Lee, Linear Regression Analysis,
    ch. 5); the horizon axis follows the project's ledger-regime issue (1x..8x horizons).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from llm_validation.validation.student import t_quantile

__all__ = ["LEVEL", "MIN_TREND_SPREAD", "carries_trend", "TREND", "ADDITIVE", "GapPrediction",
           "ols_predict", "fit_horizon", "predict_empirical"]

#: Level of every interval advise prints (the validation's 95%).
LEVEL = 0.95
#: The least factor a clock (horizon, tokens per parameter) must span across the pilot to carry
#: a trend. A span below it was not varied by design: rounding each batch to whole sequences
#: moves tokens per parameter by up to 7% on the delay-law design (19.2 to 20.5 at 20:1), and a
#: slope fitted on that is the seeds' scatter divided by the span, which read 10x outside it
#: predicted gap shares of 1e12. Such pilots are read as one horizon.
MIN_TREND_SPREAD = 1.25


def carries_trend(values: Sequence[float] | np.ndarray) -> bool:
    """Whether positive ``values`` (a clock or regressor across the pilot) span at least
    :data:`MIN_TREND_SPREAD`, so that an exponent can be fitted on them."""
    v = np.asarray(values, dtype=np.float64)
    return v.size > 0 and float(v.max() / v.min()) >= MIN_TREND_SPREAD


@dataclass(frozen=True, kw_only=True)
class GapPrediction:
    """A predicted gap fraction with its interval."""

    estimate: float
    """Predicted gap fraction g (share of the synchronous loss decrease)."""
    lo: float
    """Lower end of the interval (-inf when unbounded; 0 for an unbounded power law)."""
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


#: The fitted trend: the gap fraction as a power of the horizon. The horizon ladder (claim 18)
#: measures the 2BW gap's log-log slope against the horizon (-0.16 for AdamW, -0.91 for Muon at
#: tiny scale): a straight line in log g, not in g. A line in g extrapolates below zero (on the
#: tiny ledger: Muon's gap -5.3% of the loss decrease at 15,259 steps, i.e. 2BW "ahead" of sync).
TREND = "log g = a + b log T"
#: The fallback when a pilot pair has g <= 0 (no logarithm): the additive line in log T.
ADDITIVE = "g = a + b log T"


def ols_predict(X: np.ndarray, y: np.ndarray, x_star: np.ndarray,
                level: float = LEVEL) -> tuple[float, float, float, np.ndarray]:
    """Least squares ``y = X beta`` read at ``x_star``: (estimate, lo, hi, beta) with the t
    prediction interval of one more point, ``x*' beta +- t_{n-p} s sqrt(1 + x*' (X'X)^+ x*)``
    (infinite when ``n <= p``). A constant (``X`` one column of ones, ``x* = 1``) gives the
    mean and ``t_{n-1} s sqrt(1 + 1/n)``."""
    n, p = X.shape
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    est = float(x_star @ beta)
    if n <= p:
        return est, -math.inf, math.inf, beta
    resid = y - X @ beta
    s2 = float(resid @ resid) / (n - p)
    lever = float(x_star @ np.linalg.pinv(X.T @ X) @ x_star)
    half = float(t_quantile(level, n - p)) * math.sqrt(s2 * (1 + lever))
    return est, est - half, est + half, beta


def fit_horizon(horizons: Sequence[float], fractions: Sequence[float], target: float,
                level: float = LEVEL) -> GapPrediction:
    """The module's fit of the gap fraction against the horizon, read at ``target`` steps:
    :data:`TREND` when every fraction is positive, else :data:`ADDITIVE`; constant with one
    horizon. ``ValueError`` with no point, a non-positive horizon or a non-finite fraction."""
    T = np.asarray(horizons, dtype=np.float64)
    g = np.asarray(fractions, dtype=np.float64)
    if T.size == 0 or T.shape != g.shape:
        raise ValueError("fit_horizon needs one gap fraction per horizon, at least one pair")
    if np.any(T <= 0) or not np.all(np.isfinite(g)) or not target > 0:
        raise ValueError("fit_horizon needs positive horizons and finite gap fractions")
    n = T.size
    distinct = np.unique(T)
    positive = bool(np.all(g > 0))
    scale = "log" if positive else "g"
    if not carries_trend(distinct):
        # no trend: the prediction interval of one more pair, on the log scale when every
        # fraction is positive (a log-normal median and interval: never below zero)
        y = np.log(g) if positive else g
        why = ("one horizon" if distinct.size < 2 else
               f"one horizon: they span only {distinct[-1] / distinct[0]:.3g}x, "
               f"under {MIN_TREND_SPREAD:g}x")
        trend = (f"none ({why}): {'log g' if positive else 'g'} constant"
                 + ("" if positive else " (a pilot pair has g <= 0: no logarithm)"))
        est, lo, hi, _ = ols_predict(np.ones((n, 1)), y, np.ones(1), level)
        if positive:
            est, lo, hi = math.exp(est), math.exp(lo), math.exp(hi)
        return GapPrediction(estimate=est, lo=lo, hi=hi, n=n, method="empirical",
                             detail={"trend": trend, "scale": scale,
                                     "horizons": distinct.tolist()})
    X, xs = np.column_stack([np.ones(n), np.log(T)]), np.array([1.0, math.log(target)])
    if positive:
        # the median of a log-normal prediction: exp of the log-scale line and its interval
        est, lo, hi, (a, b) = ols_predict(X, np.log(g), xs, level)
        est, lo, hi = math.exp(est), math.exp(lo), math.exp(hi)
        trend = TREND
    else:
        # a line in g crosses zero when extrapolated (a delayed run "ahead" of its synchronous
        # twin by as much as the line likes): it is read inside the pilot's horizons only, at
        # the nearest end beyond them
        held = float(np.clip(target, distinct[0], distinct[-1]))
        xs = np.array([1.0, math.log(held)])
        est, lo, hi, (a, b) = ols_predict(X, g, xs, level)
        trend = f"{ADDITIVE} (a pilot pair has g <= 0: no power law)"
        if held != target:
            end = "longest" if held < target else "shortest"
            trend += (f"; not extrapolated: read at the pilot's {end}"
                      f" horizon, {held:g} steps")
    return GapPrediction(estimate=est, lo=lo, hi=hi, n=n, method="empirical",
                         detail={"trend": trend, "scale": scale, "a": float(a), "b": float(b),
                                 "horizons": distinct.tolist()})


def predict_empirical(pairs: Sequence[Any], target: float,
                      level: float = LEVEL) -> GapPrediction:
    """:func:`fit_horizon` over ``pairs`` (:class:`~llm_validation.advice.pilot.DelayPair` of
    one optimizer and mode, finite gap fractions) at ``target`` steps."""
    use = [p for p in pairs if math.isfinite(p.gap_fraction)]
    if not use:
        raise ValueError("the empirical predictor needs at least one delayed/sync pair")
    return fit_horizon([p.horizon for p in use], [p.gap_fraction for p in use], target, level)
