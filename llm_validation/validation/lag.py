"""Scale-free delay cost: how many synchronous steps a delayed run is behind.

A gap in nats depends on the scale (nats per byte vs per token, the loss slope at the end of
the run). The *lag* does not: it is the number of synchronous steps by which the delayed run is
behind at its end, read off the synchronous partner's validation curve.

Algorithm
    Let ``(s_i, v_i)`` be the synchronous run's validation evaluations (``s_0`` the first, the
    last at the final step ``T``) and ``e_i = min_{j <= i} v_j`` its running minimum (the loss
    the synchronous run had *reached* by step ``s_i``; monotone, so the crossing is unique).
    For the delayed run's final validation loss ``d``:

    - ``e_0 > d >= e_last`` (inside the curve): ``s*`` is the first step at which the linear
      interpolation of ``e`` reaches ``d``; ``lag = T - s*``, in ``[0, T - s_0]``.
    - ``d >= e_0`` (no better than the first evaluation): ``lag = T - s_0`` and the result is
      *censored above* (the delayed run is at least that far behind).
    - ``d < e_last`` (the delayed run ends below the synchronous one): the envelope's last
      slope (over the last :data:`SLOPE_EVALS` intervals) extrapolates past ``T``; the lag is
      negative and flagged *extrapolated*. A flat tail gives ``lag = -inf``, censored below.

    ``fraction = lag / T``; ``gap_fraction = (d - v_T) / (v_0 - v_T)`` (the gap as a share of
    the synchronous run's loss decrease from its first evaluation to its end).

Assumptions
    Both runs share the evaluation set and the step count (paired synchronous partner), and
    ``d`` is measured on the same batches as the curve: :func:`run_lag` reads the delayed run's
    closing loss on the curve's batches (``RunRecord.curve_final``), not on the larger closing
    set (``run.final_eval_batches``), whose mean differs from the curve's by a set offset.

Guarantee
    ``lag`` is monotone non-decreasing in ``d``; ``lag = 0`` iff ``d`` equals the synchronous
    run's running minimum at ``T``; exact (interpolation is linear in steps) on piecewise
    linear curves.

Reference
    The "effective steps lost" reading of a delay cost, e.g. the step-equivalent gap plots of
    asynchronous-SGD studies; here it is the project's scale-free measure (docs/reproduce.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["SLOPE_EVALS", "Lag", "lag", "run_lag", "lag_loss"]

#: Evaluations the extrapolation slope is averaged over when the delayed run ends below the
#: synchronous one: the last two intervals (one interval is too noisy at 25-step evaluations).
SLOPE_EVALS = 2


@dataclass(frozen=True, kw_only=True)
class Lag:
    """The lag of a delayed run behind its synchronous partner."""

    steps: float
    """Synchronous steps the delayed run is behind at the end (negative: ahead)."""
    fraction: float
    """``steps / T``: the lag as a share of the run."""
    gap: float
    """``d - v_T``: the gap in loss units (nats per token or per byte)."""
    gap_fraction: float
    """The gap as a share of the synchronous run's loss decrease ``v_0 - v_T``."""
    censored: str | None = None
    """``"above"`` (behind by at least ``steps``), ``"below"`` (ahead, unbounded) or None."""
    extrapolated: bool = False
    """True when the crossing lies past ``T`` (extrapolated along the last slope)."""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        return {"steps": num(self.steps), "fraction": num(self.fraction), "gap": self.gap,
                "gap_fraction": num(self.gap_fraction), "censored": self.censored,
                "extrapolated": self.extrapolated}


def lag(sync_steps: Sequence[float] | np.ndarray, sync_vals: Sequence[float] | np.ndarray,
        delayed_final: float) -> Lag:
    """The lag of a delayed run whose final validation loss is ``delayed_final`` behind the
    synchronous run evaluated at ``sync_steps`` (increasing, last = the final step)."""
    s = np.asarray(sync_steps, dtype=np.float64)
    v = np.asarray(sync_vals, dtype=np.float64)
    if s.ndim != 1 or s.shape != v.shape or s.size < 2:
        raise ValueError("lag needs >= 2 synchronous evaluations (steps and values of one shape)")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(v)) and math.isfinite(delayed_final)):
        raise ValueError("lag needs finite steps and losses")
    if np.any(np.diff(s) <= 0):
        raise ValueError("lag needs strictly increasing evaluation steps")
    d = float(delayed_final)
    T, env = float(s[-1]), np.minimum.accumulate(v)
    drop = float(v[0] - v[-1])
    gap = d - float(v[-1])
    gap_fraction = gap / drop if drop > 0 else math.nan

    def done(steps: float, **kw: Any) -> Lag:
        return Lag(steps=steps, fraction=steps / T if T > 0 else math.nan, gap=gap,
                   gap_fraction=gap_fraction, **kw)

    if d >= env[0]:
        return done(T - float(s[0]), censored="above")
    if d >= env[-1]:
        i = int(np.argmax(env <= d))          # first evaluation at or below d (i >= 1)
        a, b = env[i - 1], env[i]
        t = (a - d) / (a - b) if a > b else 1.0
        return done(T - (float(s[i - 1]) + t * float(s[i] - s[i - 1])))
    k = min(SLOPE_EVALS, s.size - 1)
    slope = float(env[-1 - k] - env[-1]) / float(s[-1] - s[-1 - k])   # loss drop per step >= 0
    if slope <= 0:
        return done(-math.inf, censored="below", extrapolated=True)
    return done(-(float(env[-1]) - d) / slope, extrapolated=True)


def run_lag(delayed: Any, sync: Any) -> Lag | None:
    """:func:`lag` of two :class:`~llm_validation.validation.runs.RunRecord` (the synchronous
    partner's ``val_loss`` series, the delayed run's closing loss on the same batches:
    ``curve_final``); None when either has not completed or the partner has fewer than two
    evaluations."""
    if delayed.final_val is None or sync.final_val is None:
        return None
    steps, vals = sync.series("val_loss")
    if steps.size < 2:
        return None
    return lag(steps, vals, float(delayed.curve_final))


def lag_loss(sync_steps: Sequence[float] | np.ndarray, sync_vals: Sequence[float] | np.ndarray,
             fraction: float) -> float:
    """The inverse of :func:`lag`: the loss difference (in the curve's units) that puts a
    delayed run ``fraction`` of the run behind the synchronous one, ``e(T - fraction T) -
    e(T)`` on the running minimum ``e`` (linear interpolation, as :func:`lag` reads it), so
    that ``lag(s, v, v_min + lag_loss(s, v, f)).fraction == f`` for ``f`` in
    ``[0, (T - s_0) / T]``. How a margin fixed in lag units becomes a margin in nats at a
    given scale (:func:`llm_validation.claims.decide.regime.lag_margin`)."""
    s = np.asarray(sync_steps, dtype=np.float64)
    v = np.asarray(sync_vals, dtype=np.float64)
    if s.ndim != 1 or s.shape != v.shape or s.size < 2 or np.any(np.diff(s) <= 0):
        raise ValueError("lag_loss needs >= 2 strictly increasing evaluation steps")
    T = float(s[-1])
    if not 0.0 <= fraction <= (T - float(s[0])) / T:
        raise ValueError(f"lag_loss: fraction={fraction!r} must lie in [0, (T - s_0) / T]")
    env = np.minimum.accumulate(v)
    return float(np.interp(T * (1.0 - fraction), s, env) - env[-1])
