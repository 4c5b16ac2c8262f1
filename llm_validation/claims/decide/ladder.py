"""The horizon ladder: how the delay's cost scales with the training horizon.

Runs of one optimizer and mode (2BW, 2BW + EF) at horizons ``H, 2H, 4H, 8H`` (each with its own
full lr schedule), every one paired by seed with the synchronous run of the same horizon, give
per seed and horizon a gap ``g(h)`` (nats) and a lag ``l(h)`` (synchronous steps behind,
:func:`llm_validation.validation.lag.lag`). This module fits how both scale.

Algorithm
    For each seed ``s`` separately, least squares of ``log g_s(h)`` on ``log h`` over the
    horizons that seed has (at least two, every gap > 0: a log needs a positive gap; a seed
    with a non-positive gap at some horizon is left out and counted): the per-seed slope
    ``b_s``. The reported slope is the mean of the ``b_s`` with a Student-t interval over seeds
    (:func:`llm_validation.validation.inference.t_interval`, ``n - 1`` degrees of freedom).
    The same for the lag (in steps, every lag > 0).

Assumptions
    Seeds are independent replicates (own initialisation and data order); the ``b_s`` are
    approximately normal. Horizons within one seed are *not* independent (they share the
    initialisation, the data order and the synchronous partner's seed), which is why the
    horizons are reduced to one number per seed before any interval: a pooled fit over
    seeds x horizons would treat them as independent and under-cover.

Guarantee
    Under those assumptions the interval covers the mean per-seed slope with its nominal
    level (it is the one-sample t interval of n independent normal values). ``slope = 0`` is a
    floor (the gap stays with the horizon), ``slope < 0`` a shrinking gap: lost progress
    (a lag-like cost, shrinking with the loss slope at the end of the run), ``slope > 0`` a
    growing gap. :func:`regime` states which one the interval supports.

Reference
    The lag-vs-floor reading is issue 16's (docs/reproduce.md, "The horizon ladder"); the
    crossing extrapolation (:func:`crossing`) is labelled as an extrapolation wherever shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from llm_validation.validation.inference import Interval, t_interval

__all__ = ["FLOOR_SLOPE", "PAPER_GAP", "SlopeFit", "per_seed_slopes", "fit_slope", "regime",
           "crossing", "Crossing"]

#: Half-width of the "floor" band of the log-log slope: |slope| < log2(1.25) = 0.32 means the
#: gap changes by less than 25% per doubling of the horizon, the same "grows" threshold as the
#: horizon claim (``catalogue.horizon.GROWTH_TOL``): a smaller band is below what 3 seeds resolve.
FLOOR_SLOPE = math.log(1.25, 2)
#: The paper's gap (nats) the Muon extrapolation is aimed at ("within about 0.01").
PAPER_GAP = 0.01


@dataclass(frozen=True, kw_only=True)
class SlopeFit:
    """Per-seed log-log slopes of a quantity against the horizon and their t interval."""

    slopes: Mapping[int, float]
    """seed -> the slope of that seed's log(value) on log(horizon)."""
    intercepts: Mapping[int, float]
    """seed -> the intercept of that fit (log value at horizon 1)."""
    interval: Interval
    """t interval of the mean slope over seeds."""
    excluded: Mapping[int, str]
    """seed -> why it has no slope (a non-positive value, fewer than two horizons)."""
    horizons: tuple[int, ...]
    """The horizons (steps) that entered any fit."""

    def to_dict(self) -> dict[str, Any]:
        return {"slopes": {str(k): v for k, v in self.slopes.items()},
                "intercepts": {str(k): v for k, v in self.intercepts.items()},
                "interval": self.interval.to_dict(),
                "excluded": {str(k): v for k, v in self.excluded.items()},
                "horizons": list(self.horizons)}


def per_seed_slopes(values: Mapping[int, Mapping[int, float]]
                    ) -> tuple[dict[int, tuple[float, float]], dict[int, str]]:
    """``values``: horizon -> seed -> value. Returns (seed -> (slope, intercept), seed ->
    why excluded)."""
    seeds = sorted({s for by_seed in values.values() for s in by_seed})
    fits, excluded = {}, {}
    for s in seeds:
        pts = [(h, by_seed[s]) for h, by_seed in sorted(values.items()) if s in by_seed]
        bad = [h for h, v in pts if not (math.isfinite(v) and v > 0)]
        if bad:
            excluded[s] = f"value <= 0 or not finite at horizon(s) {bad} (no logarithm)"
            continue
        if len({h for h, _ in pts}) < 2:
            excluded[s] = f"{len(pts)} horizon(s): a slope needs two"
            continue
        x = np.log([float(h) for h, _ in pts])
        y = np.log([float(v) for _, v in pts])
        xc = x - x.mean()
        b = float((xc * (y - y.mean())).sum() / (xc * xc).sum())
        fits[s] = (b, float(y.mean() - b * x.mean()))
    return fits, excluded


def fit_slope(values: Mapping[int, Mapping[int, float]]) -> SlopeFit:
    """The per-seed slopes of ``values`` (horizon -> seed -> value) and their t interval."""
    fits, excluded = per_seed_slopes(values)
    slopes = {s: f[0] for s, f in fits.items()}
    horizons = tuple(sorted(h for h, by_seed in values.items() if by_seed))
    return SlopeFit(slopes=slopes, intercepts={s: f[1] for s, f in fits.items()},
                    interval=t_interval(list(slopes.values())), excluded=excluded,
                    horizons=horizons)


def regime(iv: Interval, band: float = FLOOR_SLOPE) -> tuple[str, str]:
    """(regime, sentence) for a gap's slope interval: ``lag-like`` (the whole interval below
    ``-band``: the gap shrinks as the horizon grows), ``floor-like`` (inside ``(-band,
    band)``: it stays), ``growing`` (above ``band``), ``undetermined`` otherwise."""
    if not iv.bounded:
        return "undetermined", f"no interval (n = {iv.n})"
    text = f"slope {iv.fmt()}"
    if iv.hi < -band:
        return "lag-like", (f"{text} lies below -{band:.2f}: the gap shrinks as the horizon "
                            "grows (lost progress that later training makes up)")
    if -band < iv.lo and iv.hi < band:
        return "floor-like", (f"{text} lies inside +-{band:.2f}: the gap stays as the horizon "
                              "grows (a floor)")
    if iv.lo > band:
        return "growing", f"{text} lies above {band:.2f}: the gap grows with the horizon"
    return "undetermined", f"{text} overlaps the floor band +-{band:.2f} and its outside"


@dataclass(frozen=True, kw_only=True)
class Crossing:
    """Extrapolated horizon at which the fitted gap reaches a target (an extrapolation)."""

    target: float
    """The gap aimed at (nats)."""
    steps: float
    """Horizon (steps) at the mean slope; ``inf`` when the fitted gap does not shrink."""
    lo: float
    """Horizon at the steeper end of the slope interval (the earliest crossing)."""
    hi: float
    """Horizon at the shallower end (``inf`` when that end does not shrink)."""
    note: str
    """How it was computed, with the word 'extrapolation'."""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)
        return {"target": self.target, "steps": num(self.steps), "lo": num(self.lo),
                "hi": num(self.hi), "note": self.note}


def crossing(fit: SlopeFit, values: Mapping[int, Mapping[int, float]],
             target: float = PAPER_GAP) -> Crossing | None:
    """Where the fitted power law ``gap = exp(a) h^b`` would reach ``target``.

    The line goes through the centre of the measured points (mean log horizon, mean log gap
    over the seeds with a slope) with the mean slope, and with each end of the slope interval
    for the range. None when no seed has a slope. This is an extrapolation beyond the
    measured horizons: it holds only if the fitted trend continued.
    """
    if not fit.slopes:
        return None
    xs, ys = [], []
    for h, by_seed in values.items():
        for s, v in by_seed.items():
            if s in fit.slopes:
                xs.append(math.log(h))
                ys.append(math.log(v))
    x0, y0 = float(np.mean(xs)), float(np.mean(ys))
    goal = math.log(target)

    def at(b: float) -> float:
        if not math.isfinite(b) or b >= 0:
            return math.inf if y0 > goal else 0.0
        return math.exp(x0 + (goal - y0) / b)

    iv = fit.interval
    b = iv.estimate
    lo, hi = (at(iv.lo), at(iv.hi)) if iv.bounded else (math.nan, math.nan)
    note = (f"extrapolation: the power law gap = C h^b through the measured centre (h = "
            f"{math.exp(x0):.0f} steps, gap = {math.exp(y0):.3g}) with b = {b:.3g} "
            f"(interval ends for the range), continued to gap = {target:g}; it holds only if "
            "the fitted trend continued past the largest horizon measured "
            f"({max(fit.horizons)} steps)")
    return Crossing(target=target, steps=at(b), lo=min(lo, hi), hi=max(lo, hi), note=note)
