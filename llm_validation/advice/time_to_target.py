"""Time to target: how long each schedule takes to reach the synchronous run's final loss.

Algorithm
    The target is the loss a synchronous run of ``S`` steps ends at (``S = N / tokens per
    step`` for a horizon of ``N`` tokens). Every synchronous schedule (GPipe, 1F1B, interleaved,
    ZB-H1) computes the same steps, so it needs ``S`` steps: ``t = S step_time``. A delayed run
    whose lag is the fraction ``f`` of its length (:mod:`llm_validation.validation.lag`) is worth
    ``S' (1 - f)`` synchronous steps after ``S'`` steps ("effective steps"), so it reaches the
    target after ``S' = S / (1 - f)`` steps: ``t = S / (1 - f) step_time_2bw``; ``f >= 1`` never
    reaches it (``inf``). The ratio to 1F1B is ``t / (S step_time_1f1b)``; for 2BW that is
    ``1 / ((1 - f) speedup)`` with ``speedup = step_time_1f1b / step_time_2bw``.

    A predicted gap fraction ``g`` becomes a lag fraction on a synchronous curve
    ``(s_i, v_i)``: ``f = lag(s, v, v_T + g (v_0 - v_T)).steps / T``
    (:func:`lag_fraction_from_gap`); the pilot's curve stands for the shape of the target run's
    (the fraction does not change when the steps are rescaled).

    When the pilot holds a *compute frontier* (synchronous runs of the reference's size, batch
    and lr at fewer steps, each with its own schedule; :func:`frontier_unusable` says when it
    does not), the delayed loss ``v_T + g (v_0 - v_T)`` is read there instead
    (:func:`~llm_validation.validation.envelope.envelope_lag`): ``f = 1 - s*/T`` with ``s*`` the
    steps of a fully trained synchronous run reaching that loss, the share of compute the delay
    costs. The curve reading understates it (a curve at step ``T/2`` is not yet annealed).

Assumptions
    ``f`` at ``S'`` steps is the ``f`` predicted at ``S`` (a small change of horizon); the
    lag read on a synchronous curve of the same horizon stands for the steps a synchronous run
    would need (with a decaying lr a shorter synchronous run ends lower than the longer one at
    the same step, so this is slightly optimistic for the delayed run).

Guarantee
    Exact arithmetic of the model: e.g. ``f = 0.2`` and a 1.25x faster step give exactly the
    time of 1F1B (ratio 1).

Reference
    The effective-steps reading of a delay cost (docs/advise.md).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from llm_validation.validation.envelope import envelope_lag
from llm_validation.validation.lag import lag

__all__ = ["MIN_LAG_FRACTION", "REFERENCE", "RATIO_SHOWN_MAX", "lag_fraction_from_gap",
           "frontier_unusable", "delayed_steps", "time_to_target", "ratios_to_reference",
           "ratio_text"]

#: Time-to-target ratios above this are printed as a bound: the lag is then (nearly) the whole
#: run, and the ratio's digits say only how close to 1 the lag fraction's rounding came.
RATIO_SHOWN_MAX = 100.0
#: Lowest lag fraction used (a delayed run predicted to be ahead): a delayed run is never taken
#: to need fewer than half the synchronous steps; below that the lag's linear extrapolation past
#: the synchronous run's end means nothing.
MIN_LAG_FRACTION = -1.0
#: The schedule every ratio is relative to.
REFERENCE = "1f1b"


def frontier_unusable(steps: Sequence[float], losses: Sequence[float]) -> str | None:
    """Why the frontier ``(steps, losses)`` (:func:`~llm_validation.advice.pilot.frontier_points`)
    cannot carry the lag, or None when it can: it needs two step counts or more and a loss that
    falls from the shortest run to the longest (a flat frontier puts any gap at zero steps)."""
    if len(steps) < 2:
        return ("the pilot has no shorter synchronous run at the reference's size, batch and lr "
                "(no compute frontier)")
    if not min(losses[1:]) < losses[0]:
        return (f"the pilot's synchronous runs at {', '.join(f'{s:g}' for s in steps)} steps end "
                "no lower when longer (no falling compute frontier)")
    return None


def lag_fraction_from_gap(steps: Sequence[float] | np.ndarray, vals: Sequence[float] | np.ndarray,
                          gap_fraction: float,
                          frontier: tuple[Sequence[float], Sequence[float]] | None = None
                          ) -> float:
    """The lag fraction ``f`` of a delayed run whose gap fraction is ``gap_fraction`` on the
    synchronous curve ``(steps, vals)`` (module docstring), or on the compute ``frontier``
    ``(step counts, losses)`` when given (a usable one: :func:`frontier_unusable`), clamped
    below at :data:`MIN_LAG_FRACTION`; ``inf`` for ``inf`` or a lag of the whole run,
    :data:`MIN_LAG_FRACTION` for ``-inf`` (an interval the data cannot bound)."""
    if math.isnan(gap_fraction):
        raise ValueError("the gap fraction is NaN")
    if gap_fraction == math.inf:
        return math.inf
    if gap_fraction == -math.inf:
        return MIN_LAG_FRACTION
    v = np.asarray(vals, dtype=np.float64)
    d = float(v[-1] + gap_fraction * (v[0] - v[-1]))
    if frontier is not None:
        f = envelope_lag(frontier[0], frontier[1], d).fraction
        return math.inf if f >= 1.0 else max(f, MIN_LAG_FRACTION)
    res = lag(steps, vals, d)
    f = res.fraction
    if res.censored == "above" and f >= 1.0:
        return math.inf
    return max(f, MIN_LAG_FRACTION)


def delayed_steps(sync_steps: float, lag_fraction: float) -> float:
    """``S / (1 - f)``: steps a delayed run needs to reach the loss a synchronous run reaches in
    ``sync_steps``; ``inf`` when ``f >= 1``."""
    if not sync_steps > 0:
        raise ValueError(f"sync_steps must be > 0, got {sync_steps}")
    if math.isnan(lag_fraction):
        raise ValueError("the lag fraction is NaN")
    if lag_fraction >= 1.0:
        return math.inf
    return sync_steps / (1.0 - lag_fraction)


def time_to_target(step_time: float, sync_steps: float, lag_fraction: float = 0.0) -> float:
    """Seconds to the target: ``delayed_steps(S, f) * step_time`` (``f = 0``: synchronous)."""
    if not step_time > 0:
        raise ValueError(f"step_time must be > 0, got {step_time}")
    return delayed_steps(sync_steps, lag_fraction) * step_time


def ratios_to_reference(step_times: Mapping[str, float], sync_steps: float,
                        lag_fractions: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Per schedule: ``time_s`` and ``ratio`` to :data:`REFERENCE`, each with ``lo``/``hi`` when
    the schedule has a lag interval. ``step_times``: schedule -> seconds per optimizer step
    (must hold :data:`REFERENCE`); ``lag_fractions``: delayed schedule (e.g. ``2bw``,
    ``2bw+ef``) -> ``{"estimate", "lo", "hi"}`` lag fractions; schedules absent from it are
    synchronous (f = 0)."""
    if REFERENCE not in step_times:
        raise ValueError(f"the step times must include the reference schedule {REFERENCE!r}")
    ref = time_to_target(step_times[REFERENCE], sync_steps)
    out: dict[str, Any] = {}
    for name, t in step_times.items():
        f = lag_fractions.get(name)
        if f is None:
            tt = time_to_target(t, sync_steps)
            out[name] = {"time_s": tt, "ratio": tt / ref}
            continue
        row = {}
        for k in ("estimate", "lo", "hi"):
            tt = time_to_target(t, sync_steps, f[k])
            row[k] = {"time_s": tt, "ratio": tt / ref}
        out[name] = {"time_s": row["estimate"]["time_s"], "ratio": row["estimate"]["ratio"],
                     "ratio_lo": row["lo"]["ratio"], "ratio_hi": row["hi"]["ratio"],
                     "time_s_lo": row["lo"]["time_s"], "time_s_hi": row["hi"]["time_s"]}
    return out


def ratio_text(ratio: float) -> str:
    """A time-to-target ratio as printed: ``0.937x``, or ``over 100x`` past
    :data:`RATIO_SHOWN_MAX`."""
    return f"over {RATIO_SHOWN_MAX:g}x" if ratio > RATIO_SHOWN_MAX else f"{ratio:.3g}x"
